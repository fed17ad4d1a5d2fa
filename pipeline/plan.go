package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"

	"github.com/lulc/lulc/source/catalog"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
	"github.com/lulc/lulc/stage/ingest"
	"github.com/lulc/lulc/stage/scenes"
)

// PlanVersion is the plan format lulc writes and reads.
const PlanVersion = 1

// JobPlan is a job's tiles and the scenes of each, resolved once from the
// ingest config's area, dates and STAC source (lulc plan), so that every
// task of an array job maps the same tiles from the same scenes even if
// the catalog changes while the job runs. With source.labels the plan has
// no label items: the vector layer, named in the config (whose hash the
// plan records), labels the tiles. Hrefs are stored unsigned;
// runs sign them when they read the plan. Digest identifies the plan.
type JobPlan struct {
	Version int `json:"version"`
	// IngestConfig is the hash of the ingest config the plan was made
	// with: a run with another config refuses the plan.
	IngestConfig string         `json:"ingest_config"`
	Area         [4]float64     `json:"area"`
	Tiles        []PlanTile     `json:"tiles"`
	Labels       []catalog.Item `json:"label_items"`
	Digest       string         `json:"digest"` // SHA-256 of the plan with this field empty
}

// PlanTile is one tile of a plan: its scenes, one per acquisition day.
type PlanTile struct {
	Tile  string         `json:"tile"`
	Items []catalog.Item `json:"items"`
}

// Scenes counts the plan's scenes over all tiles.
func (p JobPlan) Scenes() int {
	n := 0
	for _, t := range p.Tiles {
		n += len(t.Items)
	}
	return n
}

// MakePlan searches the ingest config's source once and returns the plan.
func MakePlan(ctx context.Context, cfg config.IngestConfig, opt stage.Options) (JobPlan, error) {
	opt.Fill()
	if err := cfg.Validate(); err != nil {
		return JobPlan{}, fmt.Errorf("ingest config: %w", err)
	}
	if len(cfg.Source.Rasters) > 0 {
		return JobPlan{}, errors.New("source.rasters lists its tiles already: a plan is for STAC sources")
	}
	area, intersects, err := cfg.SearchArea()
	if err != nil {
		return JobPlan{}, err
	}
	items, labels, err := scenes.NewSearcher(cfg, opt).Items(ctx, area, intersects)
	if err != nil {
		return JobPlan{}, err
	}
	p := JobPlan{Version: PlanVersion, IngestConfig: cfg.Hash(), Area: area, Labels: labels}
	groups, err := scenes.GroupByTile(items)
	if err != nil {
		return JobPlan{}, err
	}
	for _, g := range groups {
		p.Tiles = append(p.Tiles, PlanTile{Tile: g.Tile, Items: g.Items})
	}
	p.Digest = p.digest()
	return p, nil
}

// digest hashes the plan's JSON with the digest left out.
func (p JobPlan) digest() string {
	p.Digest = ""
	body, _ := json.Marshal(p)
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

// Encode is the plan file's bytes.
func (p JobPlan) Encode() []byte {
	body, _ := json.MarshalIndent(p, "", "  ")
	return append(body, '\n')
}

// ReadPlan reads a plan file and checks its version and digest: a plan
// edited by hand or cut short is refused.
func ReadPlan(path string) (JobPlan, error) {
	body, err := os.ReadFile(path)
	if err != nil {
		return JobPlan{}, fmt.Errorf("plan %s: %w", path, err)
	}
	var p JobPlan
	if err := json.Unmarshal(body, &p); err != nil {
		return JobPlan{}, fmt.Errorf("plan %s: not a plan file: %w", path, err)
	}
	if p.Version != PlanVersion {
		return JobPlan{}, fmt.Errorf("plan %s: version %d, this lulc reads version %d", path, p.Version, PlanVersion)
	}
	if p.Digest != p.digest() {
		return JobPlan{}, fmt.Errorf("plan %s: its digest does not match its content (edited or damaged): make it again with lulc plan", path)
	}
	if len(p.Tiles) == 0 {
		return JobPlan{}, fmt.Errorf("plan %s: no tiles", path)
	}
	if err := p.checkTiles(); err != nil {
		return JobPlan{}, fmt.Errorf("plan %s: %w", path, err)
	}
	return p, nil
}

// checkTiles refuses a plan whose tiles a run cannot map as they are: a
// name that checkTileName refuses (it names the tile's output directory), a
// tile listed twice, or one without scenes. A plan is an input an
// attacker may forge and digest again.
func (p JobPlan) checkTiles() error {
	// The digest proves the plan whole, not that its maker was honest:
	// its tiles name output directories, checked as a catalog's are.
	seen := map[string]int{}
	for i, t := range p.Tiles {
		if err := config.CheckTileName(t.Tile); err != nil {
			return fmt.Errorf("tiles[%d]: %w", i, err)
		}
		if j, dup := seen[t.Tile]; dup {
			return fmt.Errorf("tiles[%d] %q is also tiles[%d]: two tiles would write one directory", i, t.Tile, j)
		}
		seen[t.Tile] = i
		if len(t.Items) == 0 {
			return fmt.Errorf("tiles[%d] %s has no scenes", i, t.Tile)
		}
	}
	return nil
}

// checkHrefs applies the href policy of the config's source (as a search
// of it would, see scenes.Searcher) to every asset of the plan's
// scenes and label items: a plan is an input an attacker may forge and
// digest again, and GDAL opens whatever it names.
func (p JobPlan) checkHrefs(cfg config.IngestConfig) error {
	policy := catalog.HrefPolicy{Allow: cfg.Source.AllowHrefs}
	if cfg.Source.Catalog != "" {
		policy.Root = catalog.CatalogRoot(cfg.Source.Catalog)
	}
	check := func(what string, it catalog.Item) error {
		for _, k := range slices.Sorted(maps.Keys(it.Assets)) {
			if href := it.Assets[k].Href; href != "" {
				if err := policy.Check(href); err != nil {
					return fmt.Errorf("plan %s: %s item %s asset %s: %w", p.Digest[:12], what, it.ID, k, err)
				}
			}
		}
		return nil
	}
	for _, t := range p.Tiles {
		for _, it := range t.Items {
			if err := check("tile "+t.Tile, it); err != nil {
				return err
			}
		}
	}
	for _, it := range p.Labels {
		if err := check("label", it); err != nil {
			return err
		}
	}
	return nil
}

// tiles are the plan's tiles to composite, with hrefs signed as the
// source needs, for an ingest config that must be the plan's.
func (p JobPlan) tiles(ctx context.Context, cfg config.IngestConfig, opt stage.Options) ([]ingest.SourceTile, error) {
	if p.IngestConfig != cfg.Hash() {
		return nil, fmt.Errorf("plan %s was made with another ingest config than this run's: make it again with lulc plan", p.Digest[:12])
	}
	if err := p.checkHrefs(cfg); err != nil {
		return nil, err
	}
	if err := ingest.ConfigureGDAL(cfg); err != nil {
		return nil, err
	}
	vec, err := ingest.CheckVectorLabels(cfg, opt.Log)
	if err != nil {
		return nil, err
	}
	// Signing writes into the items' asset maps: sign copies.
	labels := cloneItems(p.Labels)
	var all []catalog.Item
	for _, t := range p.Tiles {
		all = append(all, cloneItems(t.Items)...)
	}
	if err := scenes.SignItems(ctx, cfg, opt, all, labels); err != nil {
		return nil, err
	}
	var out []ingest.SourceTile
	k := 0
	for _, t := range p.Tiles {
		items := all[k : k+len(t.Items)]
		k += len(t.Items)
		out = append(out, &ingest.StacTile{Items: scenes.TileItems{Tile: t.Tile, Items: items}, LabelItems: labels, Area: p.Area, Vec: vec})
	}
	opt.Log.Info("tiles from the plan", "plan", p.Digest[:12], "tiles", len(out), "scenes", p.Scenes())
	return out, nil
}

func cloneItems(items []catalog.Item) []catalog.Item {
	out := slices.Clone(items)
	for i := range out {
		assets := make(map[string]catalog.Asset, len(out[i].Assets))
		for k, a := range out[i].Assets {
			assets[k] = a
		}
		out[i].Assets = assets
	}
	return out
}
