"""What people take away: figures, the guarantee sheet, the zone-size comparison and the teaching pages' numbers.

Everything here reads results of :mod:`odcore.privacy` and :mod:`odcore.od`; nothing below imports it.
"""
