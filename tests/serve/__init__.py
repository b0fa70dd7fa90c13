"""Tests of the class server (odapp.serve) and what a closed session keeps."""
