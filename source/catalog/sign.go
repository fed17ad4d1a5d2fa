package catalog

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/lulc/lulc/internal/redact"
)

// Signer appends a shared-access-signature token to the hrefs of assets
// stored in Azure Blob Storage, as Planetary Computer requires. The token
// is either given (Token) or fetched per collection from TokenURL, whose
// "{collection}" is replaced by the item's collection (Planetary Computer:
// https://planetarycomputer.microsoft.com/api/sas/v1/token/{collection}).
type Signer struct {
	Token    string
	TokenURL string
	Client   *Client
	cache    map[string]string
}

// Enabled reports whether the signer has anything to sign with.
func (s *Signer) Enabled() bool { return s != nil && (s.Token != "" || s.TokenURL != "") }

// Sign rewrites the blob-storage hrefs of items in place.
func (s *Signer) Sign(ctx context.Context, items []Item) error {
	if !s.Enabled() {
		return nil
	}
	for i := range items {
		token, err := s.token(ctx, items[i].Collection)
		if err != nil {
			return err
		}
		for k, a := range items[i].Assets {
			a.Href = signHref(a.Href, token)
			items[i].Assets[k] = a
		}
	}
	return nil
}

func (s *Signer) token(ctx context.Context, collection string) (string, error) {
	if s.Token != "" {
		return strings.TrimPrefix(s.Token, "?"), nil
	}
	if t, ok := s.cache[collection]; ok {
		return t, nil
	}
	href := strings.ReplaceAll(s.TokenURL, "{collection}", url.PathEscape(collection))
	var resp struct {
		Token string `json:"token"`
	}
	if err := s.Client.do(ctx, http.MethodGet, href, nil, &resp); err != nil {
		return "", fmt.Errorf("fetch SAS token: %w", err)
	}
	if resp.Token == "" {
		return "", fmt.Errorf("fetch SAS token: %s returned no token", href)
	}
	// A fetched token is a credential like a configured one: it must never
	// be logged or written.
	redact.Add(resp.Token)
	if s.cache == nil {
		s.cache = map[string]string{}
	}
	s.cache[collection] = resp.Token
	return resp.Token, nil
}

// signHref appends token to hrefs on *.blob.core.windows.net that carry no
// query yet; other hrefs are returned unchanged.
func signHref(href, token string) string {
	u, err := url.Parse(href)
	if err != nil || !strings.HasSuffix(u.Host, ".blob.core.windows.net") || u.RawQuery != "" {
		return href
	}
	u.RawQuery = token
	return u.String()
}
