"""Tests of the class server (odserve.launcher) and what a closed session keeps."""
