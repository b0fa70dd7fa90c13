"""The trajectory recovery page: the recovered paths on the map."""
