"""Tests of the dashboard in headless Chromium (Playwright)."""
