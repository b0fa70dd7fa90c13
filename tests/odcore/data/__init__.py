"""Tests of reading traces: loaders, validation, regions, the synthetic city, hostile files."""
