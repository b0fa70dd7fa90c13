"""What people take away: figures, the guarantee sheet, the release reports (shareable and do-not-share), utility in
the field's measures, the zone-size comparison and the teaching pages' numbers; ``published`` builds every file of a
release that may be shared, from the published table and settings only.

Everything here reads results of :mod:`odcore.privacy` and :mod:`odcore.od`; nothing below imports it.
"""
