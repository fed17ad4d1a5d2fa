package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/lulc/lulc/internal/netwait"
)

// maxBackoff caps one wait between attempts; the search deadline bounds the
// sum.
const maxBackoff = 5 * time.Minute

// MaxResponse bounds the body of one STAC response that lulc reads
// (64 MiB; a page of a thousand items is a few MB).
const MaxResponse = 64 << 20

// do sends one request through retryablehttp, retrying network errors, 5xx
// and 429, and decodes a JSON response into out. payload, when not nil, is
// the JSON body of a POST.
func (c *Client) do(ctx context.Context, method, href string, payload []byte, out any) error {
	timeout := orDefault(c.Timeout, DefaultTimeout)
	defer netwait.Begin(method + " " + href)()
	var (
		data      []byte // the body of the last response read
		attempts  int
		last      error // why the last attempt failed, for the log and errors
		lastRetry bool  // whether that failure was worth a retry
	)
	rc := &retryablehttp.Client{
		HTTPClient:   c.httpClient(timeout),
		Logger:       nil, // lulc logs retries itself, through c.Log
		RetryWaitMin: max(c.Backoff, 0),
		RetryWaitMax: maxBackoff,
		RetryMax:     max(c.Retries, 0),
		RequestLogHook: func(_ retryablehttp.Logger, _ *http.Request, i int) {
			attempts = i + 1
		},
		CheckRetry: func(ctx context.Context, resp *http.Response, err error) (bool, error) {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			switch {
			case err != nil:
				// retryablehttp knows the network errors that a retry
				// cannot mend (bad scheme, untrusted certificate, …).
				lastRetry, _ = retryablehttp.DefaultRetryPolicy(ctx, resp, err)
				last = describe(err, timeout)
			case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
				lastRetry, last = true, fmt.Errorf("HTTP %d", resp.StatusCode)
			default:
				lastRetry, last = false, nil
			}
			return lastRetry, nil
		},
		Backoff: func(minWait, maxWait time.Duration, n int, resp *http.Response) time.Duration {
			wait := retryablehttp.DefaultBackoff(minWait, maxWait, n, resp)
			wait = min(wait, maxWait)
			c.logger().Warn("retrying STAC request", "method", method, "href", href, "attempt", n+2, "after", wait, "error", last)
			return wait
		},
		ErrorHandler: retryablehttp.PassthroughErrorHandler,
	}
	var body any
	if payload != nil {
		body = payload
	}
	req, err := retryablehttp.NewRequestWithContext(ctx, method, href, body)
	if err != nil {
		return fmt.Errorf("request %s: %w", href, err)
	}
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/geo+json, application/json")
	// Reading the body inside the attempt lets a connection that breaks
	// mid-body be retried like one that fails outright, and keeps the read
	// under the per-attempt timeout.
	req.SetResponseHandler(func(resp *http.Response) error {
		defer resp.Body.Close()
		var err error
		// A page is at most a few MB: a server that sends without end
		// must not fill the memory before the request's timeout.
		data, err = io.ReadAll(io.LimitReader(resp.Body, MaxResponse+1))
		if err != nil {
			return fmt.Errorf("read response: %w", err)
		}
		if len(data) > MaxResponse {
			return fmt.Errorf("response larger than %d MiB: not a STAC page", MaxResponse>>20)
		}
		return nil
	})
	resp, err := rc.Do(req)
	if resp != nil {
		// Closed already unless the retries ran out on a status.
		defer resp.Body.Close()
	}
	gaveUp := ""
	if lastRetry {
		gaveUp = fmt.Sprintf(" (gave up after %d attempts)", attempts)
	}
	if err != nil {
		if ctx.Err() != nil {
			// The caller cancelled or the search deadline passed: say
			// which, and what the attempts before ran into.
			if last != nil {
				return fmt.Errorf("%s %s: %w (%d attempts made, the last failure: %v)", method, href, context.Cause(ctx), attempts, last)
			}
			return fmt.Errorf("%s %s: %w", method, href, context.Cause(ctx))
		}
		if last == nil {
			last = describe(err, timeout)
		}
		return fmt.Errorf("%s %s: %w%s", method, href, last, gaveUp)
	}
	if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
		return fmt.Errorf("%s %s: HTTP %d%s", method, href, resp.StatusCode, gaveUp)
	}
	if resp.StatusCode != http.StatusOK {
		snippet := strings.TrimSpace(string(data[:min(len(data), 200)]))
		return fmt.Errorf("%s %s: HTTP %d: %s", method, href, resp.StatusCode, snippet)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: decode response: %w", method, href, err)
	}
	return nil
}

// httpClient returns the client that sends one attempt: a copy of c.HTTP,
// so the caller's is left alone, bounded by the per-request timeout.
func (c *Client) httpClient(timeout time.Duration) *http.Client {
	hc := &http.Client{}
	if c.HTTP != nil {
		cp := *c.HTTP
		hc = &cp
	}
	if hc.Timeout <= 0 || hc.Timeout > timeout {
		hc.Timeout = timeout
	}
	return hc
}

// describe turns an attempt's error into the part of a message after
// "METHOD href: ", dropping the method and URL that *url.Error repeats and
// naming the config key of a per-request timeout.
func describe(err error, timeout time.Duration) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("no complete response within source.request_timeout (%s): %w", timeout, err)
	}
	return err
}
