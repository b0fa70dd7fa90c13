"""Browser-side components of the app, each in its own folder with its source and its licence."""
