package pipeline

import (
	"encoding/json"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lulc/lulc/internal/digest"
	"github.com/lulc/lulc/source/stacext"
	"github.com/lulc/lulc/stage"
)

// stacDoc is what the catalog checks read of an item or a collection.
type stacDoc struct {
	Type       string `json:"type"`
	ID         string `json:"id"`
	Collection string `json:"collection"`
	Links      []struct {
		Rel, Href, Title string
	} `json:"links"`
	Assets map[string]struct {
		Href     string `json:"href"`
		Checksum string `json:"file:checksum"`
		Size     int64  `json:"file:size"`
	} `json:"assets"`
}

func readDoc(t *testing.T, p string) stacDoc {
	t.Helper()
	body, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var d stacDoc
	if err := json.Unmarshal(body, &d); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return d
}

// isURL reports whether an href is a URL rather than a path.
func isURL(href string) bool {
	u, err := url.Parse(href)
	return err == nil && len(u.Scheme) > 1
}

// resolve follows a relative href from the document at doc, checking that
// it is relative and leads to a file.
func resolve(t *testing.T, doc, href string) string {
	t.Helper()
	if href == "" || isURL(href) || path.IsAbs(href) || filepath.IsAbs(href) {
		t.Errorf("%s: href %q is not relative", doc, href)
		return ""
	}
	p := filepath.Join(filepath.Dir(doc), filepath.FromSlash(href))
	if _, err := os.Stat(p); err != nil {
		t.Errorf("%s: href %q leads nowhere: %v", doc, href, err)
	}
	return p
}

// checkCatalog checks a collection as a STAC user would walk it: it and
// every item it links validate against the official schemas (stactest
// follows the links); every link between them is relative and resolves;
// each item names the collection as root, parent and collection; every
// asset lies beside its item with a file:checksum and file:size that match
// its bytes; local derived_from links (the model, the source items)
// resolve, and the model is linked. It returns the items' paths.
func checkCatalog(t *testing.T, collection string) []string {
	t.Helper()
	if _, err := stacext.Validate(collection); err != nil {
		t.Fatalf("%s: %#v", collection, err)
	}
	c := readDoc(t, collection)
	if c.Type != "Collection" {
		t.Errorf("%s: type %q", collection, c.Type)
	}
	var items []string
	for _, l := range c.Links {
		p := resolve(t, collection, l.Href)
		switch l.Rel {
		case "self", "root":
			if l.Href != "./"+stage.CollectionFile {
				t.Errorf("%s: %s link %q", collection, l.Rel, l.Href)
			}
		case "item":
			items = append(items, p)
		default:
			t.Errorf("%s: unexpected %s link", collection, l.Rel)
		}
	}
	want, _ := filepath.Abs(collection)
	for _, item := range items {
		it := readDoc(t, item)
		if it.Collection != c.ID {
			t.Errorf("%s: collection %q, want %q", item, it.Collection, c.ID)
		}
		rels := map[string]int{}
		model := false
		for _, l := range it.Links {
			rels[l.Rel]++
			switch l.Rel {
			case "self":
				if l.Href != "./"+filepath.Base(item) {
					t.Errorf("%s: self link %q", item, l.Href)
				}
			case "root", "parent", "collection":
				if p, _ := filepath.Abs(resolve(t, item, l.Href)); p != want {
					t.Errorf("%s: %s link %q is not %s", item, l.Rel, l.Href, collection)
				}
			case "derived_from":
				if !isURL(l.Href) {
					resolve(t, item, l.Href)
				}
				model = model || l.Title == "model"
			}
		}
		for _, rel := range []string{"self", "root", "parent", "collection"} {
			if rels[rel] != 1 {
				t.Errorf("%s: %d %s links", item, rels[rel], rel)
			}
		}
		if filepath.Base(item) == stage.ItemFile && !model {
			t.Errorf("%s links no model", item)
		}
		if rels["derived_from"] == 0 {
			t.Errorf("%s: no derived_from link", item)
		}
		if len(it.Assets) == 0 {
			t.Errorf("%s: no asset", item)
		}
		for key, a := range it.Assets {
			p := resolve(t, item, a.Href)
			if !strings.HasPrefix(a.Href, "./") || strings.Contains(a.Href[2:], "/") {
				t.Errorf("%s: asset %s at %q, not beside its item", item, key, a.Href)
			}
			sum, size, err := digest.File(p)
			if err != nil || a.Checksum != digest.Multihash(sum) || a.Size != size {
				t.Errorf("%s: asset %s: file:checksum %q and size %d, the file's %q and %d (%v)", item, key, a.Checksum, a.Size, digest.Multihash(sum), size, err)
			}
		}
	}
	if len(items) == 0 {
		t.Errorf("%s links no item", collection)
	}
	return items
}
