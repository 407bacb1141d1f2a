"""The trio shells around the sans-IO session core (docs/architecture.md)."""
