"""The results store (SQLite) and the recording of one finished run. Controller; stdlib only."""
