"""Where a point is: square grid cells, H3 hexagons and zone files (GeoJSON, GeoPackage, Shapefile), and the
density of fixes over a map image.

Each zone system maps (lat, lon) to a cell id with ``assign``; the OD step counts trips between those ids.
"""
