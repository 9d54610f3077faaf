"""`jointer simulate`: the production controllers against an embedded cluster, in virtual time.

Modules, from the bottom up:

- ``timeline``: the virtual clock and the discrete-event queue everything runs on;
- ``driver``: runs the controller manager's reconcilers from that queue (watch events,
  requeues, backoff, restarts);
- ``cloud``: the simulated AWS account (moto in process, seeded like an EKS account, with
  capacity outages and the launch record as botocore hooks);
- ``kubelet``, ``scheduler``, ``workloads``: the simulated kubelet (and cloud controller
  manager), kube-scheduler (gangs, KAI queues) and workload controllers;
- ``recorder``: what happened (pods, NodeClaims, evictions, events) for the report;
- ``scenario``, ``kinds``: the scenario file and the kinds the cluster serves;
- ``ports``, ``wiring``: the AWS cloud provider on moto and the production manager built on it;
- ``runner``: one replay of a scenario; ``report``: the JSON report and the summary table.
"""
