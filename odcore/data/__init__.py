"""Traces in: reading and validating mobility files (CSV, Parquet, Cabspotting, check-ins) and the synthetic city.

The first step of the data's path: everything after it works on a validated ``user, time, lat, lon`` table, cut to
the dense region and read in the local time zone that ``regions`` finds.
"""
