"""The relay shell: one upstream (a child process or an HTTP upstream) between the client's stdio and the session core (docs/architecture.md)."""
