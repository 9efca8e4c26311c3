-- A database as version 6 of the schema left it: migrations 001 to 006 as they were released,
-- applied as sm-admin migrate applies them, then pg_dump --no-owner --no-privileges. For
-- tests/integration/test_schema.sh, which upgrades it and compares its functions with a fresh
-- database's.
--
-- PostgreSQL database dump
--


-- Dumped from database version 15.18 (Debian 15.18-0+deb12u1)
-- Dumped by pg_dump version 15.18 (Debian 15.18-0+deb12u1)

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Name: sm_apply_retention(timestamp with time zone); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sm_apply_retention(now_ts timestamp with time zone) RETURNS integer
    LANGUAGE plpgsql
    AS $_$
DECLARE
	days integer;
	cutoff date;
	r record;
	dropped integer := 0;
BEGIN
	SELECT value::integer INTO days FROM settings WHERE key = 'retention_days';
	IF days IS NULL OR days <= 0 THEN
		RETURN 0;
	END IF;
	PERFORM pg_advisory_xact_lock(hashtext('stackmine.partitions'));
	cutoff := (now_ts AT TIME ZONE 'UTC')::date - days;
	FOR r IN SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		 WHERE i.inhparent = 'events'::regclass AND c.relname ~ '^events_p[0-9]{8}$'
		   AND to_date(substr(c.relname, 9), 'YYYYMMDD') < cutoff LOOP
		EXECUTE format('DROP TABLE %I', r.relname);
		dropped := dropped + 1;
	END LOOP;
	DELETE FROM streams WHERE received_at < cutoff::timestamp AT TIME ZONE 'UTC';
	DELETE FROM stat_deltas WHERE day < cutoff;
	DELETE FROM stat_streams WHERE day < cutoff;
	DELETE FROM stat_frames WHERE day < cutoff;
	DELETE FROM stat_calls WHERE day < cutoff;
	RETURN dropped;
END $_$;


--
-- Name: sm_ensure_partitions(date, integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sm_ensure_partitions(first_day date, ndays integer) RETURNS integer
    LANGUAGE plpgsql
    AS $$
DECLARE
	d date;
	pname text;
	created integer := 0;
BEGIN
	PERFORM pg_advisory_xact_lock(hashtext('stackmine.partitions'));
	FOR i IN 0 .. ndays - 1 LOOP
		d := first_day + i;
		pname := 'events_p' || to_char(d, 'YYYYMMDD');
		IF to_regclass(pname) IS NULL THEN
			EXECUTE format('CREATE TABLE %I PARTITION OF events FOR VALUES FROM (%L) TO (%L)',
				pname, d::timestamp AT TIME ZONE 'UTC', (d + 1)::timestamp AT TIME ZONE 'UTC');
			created := created + 1;
		END IF;
	END LOOP;
	RETURN created;
END $$;


--
-- Name: sm_fold_stats(integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sm_fold_stats(max_deltas integer) RETURNS integer
    LANGUAGE plpgsql
    AS $$
DECLARE
	folded integer;
BEGIN
	CREATE TEMP TABLE IF NOT EXISTS sm_fold ON COMMIT DROP AS
		SELECT * FROM stat_deltas WITH NO DATA;
	WITH d AS (
		DELETE FROM stat_deltas WHERE id IN (
			SELECT id FROM stat_deltas ORDER BY id LIMIT max_deltas FOR UPDATE SKIP LOCKED)
		RETURNING *)
	INSERT INTO sm_fold SELECT * FROM d;
	GET DIAGNOSTICS folded = ROW_COUNT;
	IF folded = 0 THEN
		DROP TABLE sm_fold;
		RETURN 0;
	END IF;
	INSERT INTO stat_streams (day, n)
		SELECT day, sum(streams) FROM sm_fold GROUP BY day ORDER BY day
		ON CONFLICT (day) DO UPDATE SET n = stat_streams.n + EXCLUDED.n;
	INSERT INTO stat_frames (day, frame_id, n)
		SELECT day, f, sum(c) FROM sm_fold, unnest(frame_ids, frame_counts) AS u(f, c)
		GROUP BY day, f ORDER BY day, f
		ON CONFLICT (day, frame_id) DO UPDATE SET n = stat_frames.n + EXCLUDED.n;
	INSERT INTO stat_calls (day, caller, callee, n)
		SELECT day, a, b, sum(c) FROM sm_fold, unnest(callers, callees, call_counts) AS u(a, b, c)
		GROUP BY day, a, b ORDER BY day, a, b
		ON CONFLICT (day, caller, callee) DO UPDATE SET n = stat_calls.n + EXCLUDED.n;
	DROP TABLE sm_fold;
	RETURN folded;
END $$;


SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: stat_calls; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.stat_calls (
    day date NOT NULL,
    caller integer NOT NULL,
    callee integer NOT NULL,
    n bigint NOT NULL
);


--
-- Name: call_stats; Type: VIEW; Schema: public; Owner: -
--

CREATE VIEW public.call_stats AS
 SELECT stat_calls.caller,
    stat_calls.callee,
    (sum(stat_calls.n))::bigint AS n
   FROM public.stat_calls
  GROUP BY stat_calls.caller, stat_calls.callee;


--
-- Name: clusters; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.clusters (
    id bigint NOT NULL,
    run_id bigint NOT NULL,
    kind "char" NOT NULL,
    total_cost_ns bigint NOT NULL,
    streams integer NOT NULL,
    events bigint NOT NULL,
    avg_cost_ns bigint NOT NULL,
    rank_total_cost integer NOT NULL,
    rank_streams integer NOT NULL,
    rank_events integer NOT NULL,
    rank_avg_cost integer NOT NULL,
    medoid bigint NOT NULL,
    common_frame_ids integer[] NOT NULL,
    members bigint[] NOT NULL,
    alignment jsonb NOT NULL,
    stack_ids integer[] DEFAULT '{}'::integer[] NOT NULL,
    CONSTRAINT clusters_kind_check CHECK ((kind = ANY (ARRAY['r'::"char", 'w'::"char"])))
);


--
-- Name: clusters_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.clusters ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.clusters_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: events; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.events (
    stream_ref bigint NOT NULL,
    received_at timestamp with time zone NOT NULL,
    seq integer NOT NULL,
    kind "char" NOT NULL,
    tid integer NOT NULL,
    ts_ns bigint NOT NULL,
    dur_ns bigint NOT NULL,
    stack_id integer NOT NULL,
    readier_tid integer,
    CONSTRAINT events_dur_ns_check CHECK ((dur_ns >= 0)),
    CONSTRAINT events_kind_check CHECK ((kind = ANY (ARRAY['r'::"char", 'w'::"char"])))
)
PARTITION BY RANGE (received_at);


--
-- Name: stat_frames; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.stat_frames (
    day date NOT NULL,
    frame_id integer NOT NULL,
    n bigint NOT NULL
);


--
-- Name: frame_stats; Type: VIEW; Schema: public; Owner: -
--

CREATE VIEW public.frame_stats AS
 SELECT stat_frames.frame_id,
    (sum(stat_frames.n))::bigint AS n
   FROM public.stat_frames
  GROUP BY stat_frames.frame_id;


--
-- Name: frames; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.frames (
    id integer NOT NULL,
    name text NOT NULL
);


--
-- Name: frames_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.frames ALTER COLUMN id ADD GENERATED BY DEFAULT AS IDENTITY (
    SEQUENCE NAME public.frames_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: patterns; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.patterns (
    id bigint NOT NULL,
    run_id bigint NOT NULL,
    kind "char" NOT NULL,
    rank integer NOT NULL,
    frame_ids integer[] NOT NULL,
    cost_ns bigint NOT NULL,
    events bigint NOT NULL,
    streams integer NOT NULL,
    stack_ids integer[] NOT NULL,
    CONSTRAINT patterns_kind_check CHECK ((kind = ANY (ARRAY['r'::"char", 'w'::"char"])))
);


--
-- Name: patterns_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.patterns ALTER COLUMN id ADD GENERATED BY DEFAULT AS IDENTITY (
    SEQUENCE NAME public.patterns_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: run_stacks; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.run_stacks (
    run_id bigint NOT NULL,
    kind "char" NOT NULL,
    stack_id integer NOT NULL,
    stream_ref bigint NOT NULL,
    cost_ns bigint NOT NULL,
    events integer NOT NULL,
    CONSTRAINT run_stacks_kind_check CHECK ((kind = ANY (ARRAY['r'::"char", 'w'::"char"])))
);


--
-- Name: runs; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.runs (
    id bigint NOT NULL,
    status text DEFAULT 'queued'::text NOT NULL,
    params jsonb NOT NULL,
    error text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    started_at timestamp with time zone,
    finished_at timestamp with time zone,
    worker text,
    heartbeat_at timestamp with time zone,
    attempts integer DEFAULT 0 NOT NULL,
    progress jsonb DEFAULT '{}'::jsonb NOT NULL,
    counts jsonb DEFAULT '{}'::jsonb NOT NULL,
    timings_ms jsonb DEFAULT '{}'::jsonb NOT NULL,
    CONSTRAINT runs_status_check CHECK ((status = ANY (ARRAY['queued'::text, 'running'::text, 'done'::text, 'failed'::text])))
);


--
-- Name: runs_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.runs ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.runs_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: schema_migrations; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.schema_migrations (
    version integer NOT NULL,
    name text NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL
);


--
-- Name: settings; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.settings (
    key text NOT NULL,
    value text NOT NULL
);


--
-- Name: signatures; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.signatures (
    id bigint NOT NULL,
    name text NOT NULL,
    frames text[] NOT NULL,
    status text DEFAULT 'open'::text NOT NULL,
    note text DEFAULT ''::text NOT NULL,
    from_cluster bigint,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT signatures_frames_check CHECK (((cardinality(frames) >= 1) AND (cardinality(frames) <= 512))),
    CONSTRAINT signatures_name_check CHECK (((length(name) >= 1) AND (length(name) <= 255))),
    CONSTRAINT signatures_status_check CHECK ((status = ANY (ARRAY['open'::text, 'known'::text, 'fixed'::text])))
);


--
-- Name: signatures_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.signatures ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.signatures_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: stacks; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.stacks (
    id integer NOT NULL,
    frame_ids integer[] NOT NULL,
    CONSTRAINT stacks_frame_ids_check CHECK (((cardinality(frame_ids) >= 1) AND (cardinality(frame_ids) <= 512)))
);


--
-- Name: stacks_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.stacks ALTER COLUMN id ADD GENERATED BY DEFAULT AS IDENTITY (
    SEQUENCE NAME public.stacks_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: stat_deltas; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.stat_deltas (
    id bigint NOT NULL,
    day date NOT NULL,
    streams integer NOT NULL,
    frame_ids integer[] NOT NULL,
    frame_counts integer[] NOT NULL,
    callers integer[] NOT NULL,
    callees integer[] NOT NULL,
    call_counts integer[] NOT NULL
);
ALTER TABLE ONLY public.stat_deltas ALTER COLUMN frame_ids SET STORAGE EXTERNAL;
ALTER TABLE ONLY public.stat_deltas ALTER COLUMN frame_counts SET STORAGE EXTERNAL;
ALTER TABLE ONLY public.stat_deltas ALTER COLUMN callers SET STORAGE EXTERNAL;
ALTER TABLE ONLY public.stat_deltas ALTER COLUMN callees SET STORAGE EXTERNAL;
ALTER TABLE ONLY public.stat_deltas ALTER COLUMN call_counts SET STORAGE EXTERNAL;


--
-- Name: stat_deltas_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.stat_deltas ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.stat_deltas_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: stat_streams; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.stat_streams (
    day date NOT NULL,
    n bigint NOT NULL
);


--
-- Name: stream_total; Type: VIEW; Schema: public; Owner: -
--

CREATE VIEW public.stream_total AS
 SELECT (COALESCE(sum(stat_streams.n), (0)::numeric))::bigint AS n
   FROM public.stat_streams;


--
-- Name: streams; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.streams (
    id bigint NOT NULL,
    stream_id uuid NOT NULL,
    host text NOT NULL,
    app text NOT NULL,
    version text,
    build_id text,
    labels jsonb DEFAULT '{}'::jsonb NOT NULL,
    symptom_kind text NOT NULL,
    symptom_tid integer NOT NULL,
    symptom_start_ns bigint NOT NULL,
    symptom_end_ns bigint NOT NULL,
    symptom_unit_type text,
    symptom_threshold_ns bigint,
    n_events integer NOT NULL,
    received_at timestamp with time zone DEFAULT now() NOT NULL
);


--
-- Name: streams_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.streams ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.streams_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: tokens; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.tokens (
    id integer NOT NULL,
    token_hash bytea NOT NULL,
    role text NOT NULL,
    name text DEFAULT ''::text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    revoked_at timestamp with time zone,
    CONSTRAINT tokens_role_check CHECK ((role = ANY (ARRAY['ingest'::text, 'analyst'::text, 'admin'::text])))
);


--
-- Name: tokens_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.tokens ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.tokens_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Data for Name: clusters; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.clusters (id, run_id, kind, total_cost_ns, streams, events, avg_cost_ns, rank_total_cost, rank_streams, rank_events, rank_avg_cost, medoid, common_frame_ids, members, alignment, stack_ids) FROM stdin;
\.


--
-- Data for Name: frames; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.frames (id, name) FROM stdin;
\.


--
-- Data for Name: patterns; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.patterns (id, run_id, kind, rank, frame_ids, cost_ns, events, streams, stack_ids) FROM stdin;
\.


--
-- Data for Name: run_stacks; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.run_stacks (run_id, kind, stack_id, stream_ref, cost_ns, events) FROM stdin;
\.


--
-- Data for Name: runs; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.runs (id, status, params, error, created_at, started_at, finished_at, worker, heartbeat_at, attempts, progress, counts, timings_ms) FROM stdin;
\.


--
-- Data for Name: schema_migrations; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.schema_migrations (version, name, applied_at) FROM stdin;
1	init	2026-11-29 11:46:14.387015+00
2	miner	2026-11-29 11:46:14.44444+00
3	clusters	2026-11-29 11:46:14.488697+00
4	signatures	2026-11-29 11:46:14.530528+00
5	web	2026-11-29 11:46:14.57142+00
6	patterns_ids	2026-11-29 11:46:14.610379+00
\.


--
-- Data for Name: settings; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.settings (key, value) FROM stdin;
retention_days	30
partition_days_ahead	7
\.


--
-- Data for Name: signatures; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.signatures (id, name, frames, status, note, from_cluster, created_at, updated_at) FROM stdin;
\.


--
-- Data for Name: stacks; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.stacks (id, frame_ids) FROM stdin;
\.


--
-- Data for Name: stat_calls; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.stat_calls (day, caller, callee, n) FROM stdin;
\.


--
-- Data for Name: stat_deltas; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.stat_deltas (id, day, streams, frame_ids, frame_counts, callers, callees, call_counts) FROM stdin;
\.


--
-- Data for Name: stat_frames; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.stat_frames (day, frame_id, n) FROM stdin;
\.


--
-- Data for Name: stat_streams; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.stat_streams (day, n) FROM stdin;
\.


--
-- Data for Name: streams; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.streams (id, stream_id, host, app, version, build_id, labels, symptom_kind, symptom_tid, symptom_start_ns, symptom_end_ns, symptom_unit_type, symptom_threshold_ns, n_events, received_at) FROM stdin;
\.


--
-- Data for Name: tokens; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.tokens (id, token_hash, role, name, created_at, revoked_at) FROM stdin;
\.


--
-- Name: clusters_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.clusters_id_seq', 1, false);


--
-- Name: frames_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.frames_id_seq', 1, false);


--
-- Name: patterns_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.patterns_id_seq', 1, false);


--
-- Name: runs_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.runs_id_seq', 1, false);


--
-- Name: signatures_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.signatures_id_seq', 1, false);


--
-- Name: stacks_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.stacks_id_seq', 1, false);


--
-- Name: stat_deltas_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.stat_deltas_id_seq', 1, false);


--
-- Name: streams_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.streams_id_seq', 1, false);


--
-- Name: tokens_id_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.tokens_id_seq', 1, false);


--
-- Name: clusters clusters_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.clusters
    ADD CONSTRAINT clusters_pkey PRIMARY KEY (id);


--
-- Name: frames frames_name_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.frames
    ADD CONSTRAINT frames_name_key UNIQUE (name);


--
-- Name: frames frames_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.frames
    ADD CONSTRAINT frames_pkey PRIMARY KEY (id);


--
-- Name: patterns patterns_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.patterns
    ADD CONSTRAINT patterns_pkey PRIMARY KEY (id);


--
-- Name: run_stacks run_stacks_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.run_stacks
    ADD CONSTRAINT run_stacks_pkey PRIMARY KEY (run_id, kind, stack_id, stream_ref);


--
-- Name: runs runs_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.runs
    ADD CONSTRAINT runs_pkey PRIMARY KEY (id);


--
-- Name: schema_migrations schema_migrations_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.schema_migrations
    ADD CONSTRAINT schema_migrations_pkey PRIMARY KEY (version);


--
-- Name: settings settings_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.settings
    ADD CONSTRAINT settings_pkey PRIMARY KEY (key);


--
-- Name: signatures signatures_name_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.signatures
    ADD CONSTRAINT signatures_name_key UNIQUE (name);


--
-- Name: signatures signatures_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.signatures
    ADD CONSTRAINT signatures_pkey PRIMARY KEY (id);


--
-- Name: stacks stacks_frame_ids_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.stacks
    ADD CONSTRAINT stacks_frame_ids_key UNIQUE (frame_ids);


--
-- Name: stacks stacks_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.stacks
    ADD CONSTRAINT stacks_pkey PRIMARY KEY (id);


--
-- Name: stat_calls stat_calls_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.stat_calls
    ADD CONSTRAINT stat_calls_pkey PRIMARY KEY (day, caller, callee);


--
-- Name: stat_deltas stat_deltas_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.stat_deltas
    ADD CONSTRAINT stat_deltas_pkey PRIMARY KEY (id);


--
-- Name: stat_frames stat_frames_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.stat_frames
    ADD CONSTRAINT stat_frames_pkey PRIMARY KEY (day, frame_id);


--
-- Name: stat_streams stat_streams_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.stat_streams
    ADD CONSTRAINT stat_streams_pkey PRIMARY KEY (day);


--
-- Name: streams streams_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.streams
    ADD CONSTRAINT streams_pkey PRIMARY KEY (id);


--
-- Name: streams streams_stream_id_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.streams
    ADD CONSTRAINT streams_stream_id_key UNIQUE (stream_id);


--
-- Name: tokens tokens_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.tokens
    ADD CONSTRAINT tokens_pkey PRIMARY KEY (id);


--
-- Name: tokens tokens_token_hash_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.tokens
    ADD CONSTRAINT tokens_token_hash_key UNIQUE (token_hash);


--
-- Name: clusters_run; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX clusters_run ON public.clusters USING btree (run_id, kind, rank_total_cost);


--
-- Name: clusters_run_avg; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX clusters_run_avg ON public.clusters USING btree (run_id, avg_cost_ns DESC, id);


--
-- Name: clusters_run_cost; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX clusters_run_cost ON public.clusters USING btree (run_id, total_cost_ns DESC, id);


--
-- Name: clusters_run_events; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX clusters_run_events ON public.clusters USING btree (run_id, events DESC, id);


--
-- Name: clusters_run_streams; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX clusters_run_streams ON public.clusters USING btree (run_id, streams DESC, id);


--
-- Name: events_stream; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX events_stream ON ONLY public.events USING btree (stream_ref);


--
-- Name: patterns_run; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX patterns_run ON public.patterns USING btree (run_id, kind, rank);


--
-- Name: runs_created; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_created ON public.runs USING btree (created_at DESC);


--
-- Name: runs_queue; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_queue ON public.runs USING btree (id) WHERE (status = ANY (ARRAY['queued'::text, 'running'::text]));


--
-- Name: streams_app_received; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX streams_app_received ON public.streams USING btree (app, received_at DESC);


--
-- Name: streams_host; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX streams_host ON public.streams USING btree (host);


--
-- Name: streams_labels; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX streams_labels ON public.streams USING gin (labels jsonb_path_ops);


--
-- Name: streams_received; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX streams_received ON public.streams USING btree (received_at DESC);


--
-- Name: clusters clusters_medoid_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.clusters
    ADD CONSTRAINT clusters_medoid_fkey FOREIGN KEY (medoid) REFERENCES public.patterns(id) ON DELETE CASCADE;


--
-- Name: clusters clusters_run_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.clusters
    ADD CONSTRAINT clusters_run_id_fkey FOREIGN KEY (run_id) REFERENCES public.runs(id) ON DELETE CASCADE;


--
-- Name: patterns patterns_run_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.patterns
    ADD CONSTRAINT patterns_run_id_fkey FOREIGN KEY (run_id) REFERENCES public.runs(id) ON DELETE CASCADE;


--
-- Name: run_stacks run_stacks_run_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.run_stacks
    ADD CONSTRAINT run_stacks_run_id_fkey FOREIGN KEY (run_id) REFERENCES public.runs(id) ON DELETE CASCADE;


--
-- Name: signatures signatures_from_cluster_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.signatures
    ADD CONSTRAINT signatures_from_cluster_fkey FOREIGN KEY (from_cluster) REFERENCES public.clusters(id) ON DELETE SET NULL;


--
-- PostgreSQL database dump complete
--


