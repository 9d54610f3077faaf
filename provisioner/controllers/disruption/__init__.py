"""Disruption: which nodes go, what replaces them, and how they go (Karpenter's ``c/disruption``).

``controllers.DisruptionControllers`` builds the reconcilers; ``candidates``, ``budgets`` and the
methods (``emptiness``, ``drift``, ``consolidation``) decide; ``validation`` re-checks;
``commandqueue`` executes; ``rescheduling`` is the scheduling simulation behind every decision.
"""
