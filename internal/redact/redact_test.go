package redact

import (
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	cases := []struct{ in, want string }{
		{"https://acct.blob.core.windows.net/c/b.tif?st=2024&se=2025&sp=rl&sv=2021&sr=c&sig=AbC%2Bd", "https://acct.blob.core.windows.net/c/b.tif?st=2024&se=2025&sp=rl&sv=2021&sr=c&sig=REDACTED"},
		{"https://user:hunter22@example.com/a.tif", "https://user:REDACTED@example.com/a.tif"},
		{"https://b.s3.amazonaws.com/k.tif?X-Amz-Credential=AKIA%2F1&X-Amz-Signature=ff&X-Amz-Expires=60", "https://b.s3.amazonaws.com/k.tif?X-Amz-Credential=REDACTED&X-Amz-Signature=REDACTED&X-Amz-Expires=60"},
		{"/vsicurl/https://u:p4ss@h/x.tif?token=abc", "/vsicurl/https://u:REDACTED@h/x.tif?token=REDACTED"},
		{"https://earth-search.aws.element84.com/v1/search?page=2", "https://earth-search.aws.element84.com/v1/search?page=2"},
		{"/data/scene/B04.tif", "/data/scene/B04.tif"},
	}
	for _, c := range cases {
		if got := URL(c.in); got != c.want {
			t.Errorf("URL(%q)\n got %q\nwant %q", c.in, got, c.want)
		}
	}
}

func TestOptionsAndString(t *testing.T) {
	opts := Options(map[string]string{
		"AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG", "AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7",
		"GDAL_HTTP_HEADERS": "Authorization: Bearer eyJhbGciOi", "AWS_NO_SIGN_REQUEST": "YES", "GDAL_HTTP_MAX_RETRY": "4",
	})
	for k, want := range map[string]string{"AWS_SECRET_ACCESS_KEY": Mark, "AWS_ACCESS_KEY_ID": Mark, "GDAL_HTTP_HEADERS": Mark, "AWS_NO_SIGN_REQUEST": "YES", "GDAL_HTTP_MAX_RETRY": "4"} {
		if opts[k] != want {
			t.Errorf("%s = %q, want %q", k, opts[k], want)
		}
	}
	msg := String(`open /vsis3/b/k.tif with key wJalrXUtnFEMI/K7MDENG failed: GET https://x/y?sig=s3cr3t: 403`)
	for _, leak := range []string{"wJalrXUtnFEMI", "s3cr3t"} {
		if strings.Contains(msg, leak) {
			t.Errorf("String leaks %q: %s", leak, msg)
		}
	}
	if !strings.Contains(msg, "/vsis3/b/k.tif") {
		t.Errorf("String removed more than credentials: %s", msg)
	}
}
