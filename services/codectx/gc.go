package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"codectx/pkg/blob/minio"
	"codectx/pkg/dense"
	"codectx/pkg/embed/embedders"
	"codectx/pkg/pipeline"
	"codectx/pkg/vector"
)

// runGC collects the parse and embedding caches of a blob store: the
// local one under --data, or an S3 bucket.
func runGC(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("gc", flag.ContinueOnError)
	fs.SetOutput(usageOut("gc", stderr, args))
	var c config
	fs.StringVar(&c.data, "data", dataDir(), "data directory: local blob store ($"+envData+")")
	c.storeFlags(fs)
	// gc only deletes: a mistyped --data or --s3-bucket is refused, not
	// created empty and reported collected.
	fs.Lookup("s3-bucket").Usage = "S3 bucket, which must exist ($" + envS3Bucket + ")"
	c.s3.MustExist = true
	dry := fs.Bool("dry-run", false, "count what would be deleted, delete nothing")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	all := fs.Bool("all", false, "also when no manifest or segment exists (empties the cache, e.g. codectx eval's); with --vectors, also when the store holds no vectors of --embedder's model")
	vectors := fs.Bool("vectors", false, "also drop the vector collections and cached embeddings of every model but --embedder's (after a model switch, once no server uses the old one)")
	var d denseFlags
	d.register(fs, true)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: codectx gc [flags]\n\nDeletes parse-cache entries that no stored manifest or segment references\n(files no snapshot contains any more, results of older parser versions), and\nembedding-cache entries that no segment, vector set or embed plan of their\ntenant needs. Safe to run beside indexing. With --vectors it also drops the\nvector collections and cached embeddings of every model but --embedder's.")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *vectors && d.spec == "" {
		return fmt.Errorf("gc --vectors: name the embedder the servers use (--embedder or $%s): the vectors of every other model are dropped", embedders.Env)
	}
	if c.s3.Endpoint == "" {
		if _, err := openData(c.data); err != nil {
			return fmt.Errorf("gc: %w", err)
		}
	}
	store, where, err := c.store(ctx)
	if errors.Is(err, minio.ErrNoBucket) {
		return fmt.Errorf("gc: no S3 bucket %q at %s: give the --s3-bucket ($%s) the services use (gc creates none)", c.s3.Bucket, c.s3.Endpoint, envS3Bucket)
	}
	if err != nil {
		return fmt.Errorf("gc: %w", err)
	}
	// --vectors is checked before anything is deleted (dropCollections,
	// dry): a refusal deletes nothing.
	var vec vectorGC
	eopt := pipeline.GCOptions{DryRun: *dry, AllowNoRoots: *all}
	var kit *denseKit
	var keep vector.Collection
	if *vectors {
		if kit, err = d.open(ctx, store); err != nil {
			return fmt.Errorf("gc: %w", err)
		}
		defer kit.close()
		keep = dense.Collection(kit.emb)
		eopt.Collection = keep.Name()
		if vec, err = dropCollections(ctx, kit.store, keep, true, *all); err != nil {
			return fmt.Errorf("gc: %w", err)
		}
	}
	st, err := pipeline.CollectParseCache(ctx, store, pipeline.GCOptions{DryRun: *dry, AllowNoRoots: *all})
	if errors.Is(err, pipeline.ErrNoRoots) {
		return fmt.Errorf("gc: %s holds %d cached parse results and no manifest or segment, so all would go (codectx eval keeps only a cache); pass --all to empty it", where, st.Cached)
	}
	if err != nil {
		return err
	}
	emb, err := pipeline.CollectEmbeddingCache(ctx, store, eopt)
	if errors.Is(err, pipeline.ErrNoRoots) {
		return fmt.Errorf("gc: %s holds %d cached embeddings and no segment, vector set or embed plan, so all would go; pass --all to empty it", where, emb.Cached)
	}
	if err != nil {
		return err
	}
	if *vectors {
		// Last: a refusal above leaves the vectors as they were.
		if !*dry {
			if vec, err = dropCollections(ctx, kit.store, keep, false, *all); err != nil {
				return fmt.Errorf("gc: %w", err)
			}
		}
		vec.Store = kit.where
	}
	if *asJSON {
		r := gcReport{GCStats: st, Embeddings: emb}
		if *vectors {
			r.Vectors = &vec
		}
		return writeIndented(stdout, r)
	}
	verb := "deleted"
	if *dry {
		verb = "would delete"
	}
	fmt.Fprintf(stdout, "parse cache in %s: %d entries, %d referenced by %d manifests and segments, %s %d\n",
		where, st.Cached, st.Kept, st.Roots, verb, st.Deleted)
	if emb.Cached > 0 {
		fmt.Fprintf(stdout, "embedding cache: %d vectors, %d needed by %d segments, vector sets and embed plans of their tenant, %s %d\n",
			emb.Cached, emb.Kept, emb.Roots, verb, emb.Deleted)
	}
	if *vectors {
		fmt.Fprintf(stdout, "vector collections (%s): kept %s, %s %d%s\n", vec.Store, vec.Kept, verb, len(vec.Dropped), listed(vec.Dropped))
	}
	return nil
}

// vectorGC is what gc --vectors did: the collection kept (the
// embedder's) and those of other models dropped.
type vectorGC struct {
	Store   string   `json:"store"`
	Kept    string   `json:"kept"`
	Dropped []string `json:"dropped"`
}

// dropCollections drops every collection of vs but keep's (only lists
// them on a dry run). A store that holds no vectors of keep's is refused
// unless all: the embedder named is then likely not the servers' (another
// dim= or model directory names another collection), and the one they
// use would go.
func dropCollections(ctx context.Context, vs vector.Store, keep vector.Collection, dry, all bool) (vectorGC, error) {
	r := vectorGC{Kept: keep.Name(), Dropped: []string{}}
	names, err := vs.Collections(ctx)
	if err != nil {
		return r, err
	}
	if len(names) > 0 && !slices.Contains(names, r.Kept) && !all {
		return r, fmt.Errorf("the vector store holds no collection %s, the embedder's, but %s: is it the embedder the servers use? Pass --all to drop them anyway", r.Kept, strings.Join(names, ", "))
	}
	for _, name := range names {
		if name == r.Kept {
			continue
		}
		if !dry {
			if err := vs.Drop(ctx, name); err != nil {
				return r, err
			}
		}
		r.Dropped = append(r.Dropped, name)
	}
	return r, nil
}

// listed is ": a, b" for names, "" for none.
func listed(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return ": " + strings.Join(names, ", ")
}

// gcReport is what gc --json prints: the parse cache's counts, and the
// embedding cache's.
type gcReport struct {
	pipeline.GCStats
	Embeddings pipeline.GCStats `json:"embeddings"`
	Vectors    *vectorGC        `json:"vectors,omitempty"` // with --vectors
}
