// Package redact keeps credentials out of everything lulc writes: outputs,
// manifests, reports and logs. Credentials reach lulc as config values
// (a Planetary Computer SAS token, cloud keys passed as GDAL options) and
// inside URLs (user:password@host, signed query parameters). Config values
// are registered once with Add and replaced wherever they appear; URLs are
// recognised by their shape, so a signed href is cleaned even when the
// token was fetched at run time.
package redact

import (
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Mark replaces every redacted value.
const Mark = "REDACTED"

var (
	mu      sync.RWMutex
	secrets []string
)

// Add registers secret values to be replaced in String. Values shorter
// than four bytes are ignored: replacing "1" or "yes" everywhere would
// garble text and protect nothing.
func Add(values ...string) {
	mu.Lock()
	defer mu.Unlock()
	for _, v := range values {
		if len(v) >= 4 && !slices.Contains(secrets, v) {
			secrets = append(secrets, v)
		}
	}
	// Longest first, so a secret containing another is replaced whole.
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
}

// sensitiveKey matches names of GDAL options, query parameters and config
// keys whose values are credentials: AWS_SECRET_ACCESS_KEY,
// AZURE_STORAGE_SAS_TOKEN, GDAL_HTTP_USERPWD, sig, X-Amz-Credential, ….
// AWS_NO_SIGN_REQUEST or GDAL_HTTP_MAX_RETRY are settings, not credentials,
// and stay readable.
var sensitiveKey = regexp.MustCompile(`(?i)(secret|token|passw|pwd|access_key|^key$|_key$|apikey|signature|^sig$|credential|authorization|^auth|sas|connection_string|cookie|headers?$|bearer)`)

// SensitiveKey reports whether a key names a credential.
func SensitiveKey(key string) bool { return sensitiveKey.MatchString(key) }

// Options returns a copy of key=value options (GDAL configuration) with the
// values of sensitive keys replaced, and registers those values with Add.
func Options(opts map[string]string) map[string]string {
	if opts == nil {
		return nil
	}
	out := make(map[string]string, len(opts))
	for k, v := range opts {
		if SensitiveKey(k) && v != "" {
			Add(v)
			v = Mark
		}
		out[k] = v
	}
	return out
}

// URL removes the credentials from one URL: the password of its user
// information and the values of sensitive query parameters. Anything that
// does not parse as a URL with a scheme is returned unchanged.
func URL(href string) string {
	prefix := ""
	if strings.HasPrefix(href, "/vsi") {
		// GDAL paths such as /vsicurl/https://… wrap a URL.
		if i := strings.Index(href, "://"); i > 0 {
			if j := strings.LastIndex(href[:i], "/"); j >= 0 {
				prefix, href = href[:j+1], href[j+1:]
			}
		}
	}
	u, err := url.Parse(href)
	if err != nil || len(u.Scheme) < 2 {
		return prefix + href
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), Mark)
	}
	if u.RawQuery != "" {
		q := u.Query()
		changed := false
		for k, vs := range q {
			if SensitiveKey(k) {
				for i := range vs {
					vs[i] = Mark
				}
				changed = true
			}
		}
		if changed {
			u.RawQuery = encodeQuery(u.RawQuery, q)
		}
	}
	return prefix + u.String()
}

// encodeQuery re-encodes q in the order the keys had in raw, so that a
// redacted URL still reads like the original.
func encodeQuery(raw string, q url.Values) string {
	var parts []string
	seen := map[string]bool{}
	for _, kv := range strings.Split(raw, "&") {
		k, _, _ := strings.Cut(kv, "=")
		if key, err := url.QueryUnescape(k); err == nil && !seen[key] {
			seen[key] = true
			for _, v := range q[key] {
				parts = append(parts, url.QueryEscape(key)+"="+strings.ReplaceAll(url.QueryEscape(v), "%2F", "/"))
			}
		}
	}
	return strings.Join(parts, "&")
}

// urlInText finds URLs in free text (log lines, error messages, GDAL's
// messages), up to the first space or quote.
var urlInText = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>]+`)

// String removes credentials from free text: registered secrets and the
// credentials of every URL in it.
func String(s string) string {
	mu.RLock()
	for _, v := range secrets {
		s = strings.ReplaceAll(s, v, Mark)
	}
	mu.RUnlock()
	return urlInText.ReplaceAllStringFunc(s, URL)
}
