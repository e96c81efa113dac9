"""The repository's scripts; backends.py is imported by the lab code (chaos, benchmarks) too."""
