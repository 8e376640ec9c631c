"""The Kimina-Prover-RL engine: rollouts, Lean verification, Dr.GRPO learning.

Plain Python that runs inside a Ray job. It never imports Django: the platform and
the trainer meet only through the run configuration (``trainer.config``) and the
typed events the trainer publishes (``trainer.observability.events``).
"""
