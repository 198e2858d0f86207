"""bench-console: builds main and a candidate from scratch, checks parity first,
times them interleaved, decides significance against measured noise, seals a receipt."""
__version__ = "0.1.0"
