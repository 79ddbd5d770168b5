"""The results store (SQLite), the recording of one finished run, and a sweep planned against
the store (sweep_resume). Controller; stdlib only."""
