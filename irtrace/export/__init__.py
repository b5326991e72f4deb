"""Exporters: a user's model -> a bundle (canonical graph + recorded values)."""
