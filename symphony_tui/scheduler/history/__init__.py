"""The event history: the bounded ring and per-issue transcripts the front ends read
(``eventlog.EventHistory``, ``transcripts``) and the rotated JSONL file on disk
(``event_file``)."""
