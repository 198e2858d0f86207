"""`console bisect`: find the first item of an ordered range (commits, releases) that changed speed,
each step a round decided at stated rates (``core.bisection`` holds every rule; this package runs the
rounds and keeps the record)."""
from .driver import Bisection, Config, StepRunner
from .record import BisectRecord

__all__ = ["BisectRecord", "Bisection", "Config", "StepRunner"]
