"""The gate and everything it reads to decide: parity grading, the reps that count, guards, the speed
decision, the noise and matrix deciders, the serving checks, and the kinds of round."""
