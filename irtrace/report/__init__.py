"""Reports: JSON schema, terminal table, HTML. Knows no computation."""
