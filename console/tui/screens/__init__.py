"""Screens of the console app."""
