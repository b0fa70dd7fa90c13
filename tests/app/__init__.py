"""Tests of the dashboard's pages (AppTest) and odapp."""
