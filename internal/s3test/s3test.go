// Package s3test starts a local S3-compatible server for tests that go
// through object storage (s3:// via GDAL's /vsis3/): s3rver, from npm.
package s3test

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Server starts s3rver (npm; scripts/s3rver installs it) on a free local
// port with an empty bucket, points GDAL's /vsis3/ at it through the AWS_*
// variables, and returns the bucket's URL. It skips the test where
// s3rver is not installed.
func Server(t testing.TB) string {
	t.Helper()
	bin := os.Getenv("LULC_S3RVER")
	if bin == "" {
		if p, err := exec.LookPath("s3rver"); err == nil {
			bin = p
		} else if home, err := os.UserCacheDir(); err == nil {
			bin = filepath.Join(home, "lulc", "s3rver", "node_modules", ".bin", "s3rver")
		}
	}
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("s3rver is not installed (scripts/s3rver installs it from npm): %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "--silent", "--address", "127.0.0.1", "--port", fmt.Sprint(port), "--directory", t.TempDir(), "--configure-bucket", "lulc-test")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	up := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "listening") {
				up <- true
			}
		}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("s3rver did not start listening in 20 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	for k, v := range map[string]string{"AWS_S3_ENDPOINT": fmt.Sprintf("127.0.0.1:%d", port), "AWS_HTTPS": "NO", "AWS_VIRTUAL_HOSTING": "FALSE",
		"AWS_ACCESS_KEY_ID": "S3RVER", "AWS_SECRET_ACCESS_KEY": "S3RVER", "AWS_REGION": "us-east-1"} {
		t.Setenv(k, v)
	}
	return "s3://lulc-test"
}
