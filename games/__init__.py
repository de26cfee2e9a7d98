"""Named game presets: OpenSpiel games by short name."""
