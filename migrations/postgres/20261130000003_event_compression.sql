-- Event bodies carry large tool outputs: lz4 compresses them several times faster than the
-- default pglz. Servers built without lz4 keep the default.
DO $$
BEGIN
    ALTER TABLE events ALTER COLUMN body SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported OR invalid_parameter_value THEN
    RAISE NOTICE 'lz4 is not available: event bodies keep the default compression';
END
$$;
