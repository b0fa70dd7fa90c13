"""Column names used across the engine (one place, so pages and CLI agree).

Trace table schema (see README "Data formats"):

==========  ====================================  =========================
column      meaning                               dtype
==========  ====================================  =========================
``user``    pseudonymous user id                  string or integer
``time``    timestamp, UTC                        datetime64[ns, UTC]
``lat``     latitude, WGS84 degrees               float64
``lon``     longitude, WGS84 degrees              float64
``loc``     optional precomputed location id      integer (e.g. POI id)
==========  ====================================  =========================
"""

USER = "user"
TIME = "time"
LAT = "lat"
LON = "lon"
LOC = "loc"

CELL = "cell"
WEEK = "week"
HOUR = "hour"
ORIGIN = "origin"
DESTINATION = "destination"
COUNT = "count"          # distinct users on an (week, origin, destination) pair
TRIPS = "trips"          # total trips of a user in a week
UNIQUE_TRIPS = "unique_trips"

TRUE_COUNT = "true_count"
NOISE = "noise"
NOISY_COUNT = "noisy_count"
RELEASED = "released"
RELEASE_PROB = "release_prob"

TRACE_COLUMNS = (USER, TIME, LAT, LON)

# Local time zone of formats whose documentation states it (used when the time zone is "auto"): the Cabspotting
# README gives America/Los_Angeles.
FORMAT_TZ = {"cabspotting": "America/Los_Angeles"}
