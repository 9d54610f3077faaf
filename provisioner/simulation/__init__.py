"""`jointer simulate`: virtual clock, simulated kubelet and scheduler, scenario runner."""
