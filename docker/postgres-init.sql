-- Run once when the compose PostgreSQL volume is first created. ctxd applies its own schema
-- migrations at start; this only sets database-wide defaults that suit it.
ALTER DATABASE ctxd SET timezone TO 'UTC';
