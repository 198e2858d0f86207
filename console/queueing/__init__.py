"""The candidate queue: its store on disk, the worker that runs booked candidates through
rounds, SLURM's jobs and the batch scheduler on top of them. The policy is ``core.queue``."""
