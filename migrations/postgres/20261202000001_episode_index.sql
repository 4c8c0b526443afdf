-- The episodes' rules are checked at every append that starts or ends one, against the
-- session's earlier episode events: found without reading the rest of the log.
CREATE INDEX events_episodes_idx ON events (session_id, seq)
    WHERE type IN ('episode_start', 'episode_end');
