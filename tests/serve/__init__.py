"""Tests of the class server (odserve) and what a closed session keeps."""
