-- 019_fleet_bounds: a build's merged profile names the hosts it held back
-- (docs/fleet.md, "Bounds and a robust merge"): [{"host", "reason"}], a host
-- whose thresholds are far off the other hosts' of the build.
ALTER TABLE profiles_merged ADD COLUMN held_back jsonb NOT NULL DEFAULT '[]'::jsonb;
