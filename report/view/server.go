package view

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// web holds the page: index.html, view.css and the bundle that scripts/web
// makes from view.js with OpenLayers and geotiff.js (bundle.css: OpenLayers'
// own style).
//
//go:embed web/index.html web/view.css web/bundle.js web/bundle.css
var web embed.FS

// DefaultHost is the address a Server binds unless told otherwise: this
// machine only.
const DefaultHost = "127.0.0.1"

// Server serves one run's page and files on a bound port.
type Server struct {
	run  *Run
	ln   net.Listener
	root *os.Root
	// files maps a URL path under /files/ to the file it serves: a path
	// inside the run's directory (opened through root, which refuses
	// names that leave it) or, for labels the user named, an absolute one.
	files    map[string]served
	loopback bool
}

// served is one file a Server may serve.
type served struct {
	name    string // inside the run's directory, or absolute when outside
	outside bool
}

// Listen binds host:port (port 0: any free port) for run's page. A port
// that is taken fails with an error that wraps syscall.EADDRINUSE.
func Listen(run *Run, host string, port int) (*Server, error) {
	root, err := os.OpenRoot(run.Dir)
	if err != nil {
		return nil, fmt.Errorf("open run directory: %w", err)
	}
	s := &Server{run: run, root: root, files: map[string]served{}}
	for _, t := range run.Tiles {
		for layer, name := range t.Layers {
			outside := layer == LayerLabels && t.labelsOutside
			s.files[s.fileURL(t, layer, name)] = served{name: name, outside: outside}
		}
		for _, name := range t.Side {
			s.files[s.fileURL(t, "", name)] = served{name: name}
		}
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		root.Close()
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("port %d on %s is in use: %w", port, host, err)
		}
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	s.ln = ln
	s.loopback = net.ParseIP(host) != nil && net.ParseIP(host).IsLoopback() || host == "localhost"
	return s, nil
}

// fileURL is the URL path under which a tile's file is served:
// /files/TILE/NAME (labels the user named: /files/TILE/labels.tif).
func (s *Server) fileURL(t *Tile, layer, name string) string {
	base := path.Base(filepath.ToSlash(name))
	if layer != "" {
		base = layerFiles[layer]
	}
	return "/files/" + url.PathEscape(t.Name) + "/" + url.PathEscape(base)
}

// Addr is the address the server listens on.
func (s *Server) Addr() *net.TCPAddr { return s.ln.Addr().(*net.TCPAddr) }

// URL is the page's address: http://HOST:PORT/ (127.0.0.1 for a server
// bound to every interface).
func (s *Server) URL() string {
	host := s.Addr().IP.String()
	if s.Addr().IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(s.Addr().Port)) + "/"
}

// Serve answers requests until ctx ends, then shuts down, letting
// requests under way finish for a second, and closes the run's directory.
func (s *Server) Serve(ctx context.Context) error {
	defer s.root.Close()
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(s.ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("serve %s: %w", s.URL(), err)
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		srv.Shutdown(sctx)
		// Shutdown may come before Serve took the listener: close it
		// here, and wait, so that the port is free on return.
		s.ln.Close()
		<-done
		return nil
	}
}

// Close releases the port and the run's directory of a server that was
// not served.
func (s *Server) Close() error {
	s.root.Close()
	return s.ln.Close()
}

// Handler answers the page (/), its assets, the run's description
// (/run.json) and the run's files (/files/TILE/NAME); everything else is
// 404. A server bound to the loopback interface answers only requests
// addressed to a loopback name, so that a web page elsewhere cannot reach
// it through a DNS name rebound to 127.0.0.1.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.asset("web/index.html", "text/html; charset=utf-8"))
	mux.HandleFunc("GET /view.css", s.asset("web/view.css", "text/css; charset=utf-8"))
	mux.HandleFunc("GET /bundle.css", s.asset("web/bundle.css", "text/css; charset=utf-8"))
	mux.HandleFunc("GET /bundle.js", s.asset("web/bundle.js", "text/javascript; charset=utf-8"))
	mux.HandleFunc("GET /run.json", s.describe)
	mux.HandleFunc("GET /files/", s.file)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.loopback && !loopbackHost(r.Host) {
			http.Error(w, "this server answers only requests to localhost or 127.0.0.1", http.StatusForbidden)
			return
		}
		w.Header().Set("X-Content-Type-Options", "nosniff")
		mux.ServeHTTP(w, r)
	})
}

// loopbackHost says whether a request's Host names this machine.
func loopbackHost(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	host = strings.Trim(host, "[]")
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// asset serves an embedded file of the page.
func (s *Server) asset(name, ctype string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		b, err := fs.ReadFile(web, name)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", ctype)
		w.Header().Set("Cache-Control", "no-cache")
		w.Write(b)
	}
}

// file serves one of the run's files by its URL path, with ranges
// (http.ServeContent), so that geotiff.js reads a COG's tiles.
func (s *Server) file(w http.ResponseWriter, r *http.Request) {
	f, ok := s.files[r.URL.EscapedPath()]
	if !ok {
		http.NotFound(w, r)
		return
	}
	var (
		fh  *os.File
		err error
	)
	if f.outside {
		fh, err = os.Open(f.name)
	} else {
		fh, err = s.root.Open(filepath.FromSlash(f.name))
	}
	if err != nil {
		http.Error(w, "cannot open "+path.Base(r.URL.Path), http.StatusNotFound)
		return
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		http.NotFound(w, r)
		return
	}
	switch path.Ext(f.name) {
	case ".tif":
		w.Header().Set("Content-Type", "image/tiff")
	case ".json":
		w.Header().Set("Content-Type", "application/json")
	case ".xml", ".qml":
		w.Header().Set("Content-Type", "application/xml")
	}
	http.ServeContent(w, r, path.Base(f.name), fi.ModTime(), fh)
}

// page is the run as the page reads it from /run.json.
type page struct {
	Name  string     `json:"name"`
	Tiles []pageTile `json:"tiles"`
}

// pageTile is one tile as the page reads it: its layers' URLs.
type pageTile struct {
	Name         string            `json:"name"`
	EPSG         int               `json:"epsg,omitempty"`
	Layers       map[string]string `json:"layers"`
	Files        map[string]string `json:"files"`
	Classes      []Class           `json:"classes"`
	AOAThreshold float64           `json:"aoaThreshold,omitempty"`
	RGB          *RGB              `json:"rgb,omitempty"`
}

// describe answers /run.json: the tiles, their layers' URLs and schemes.
func (s *Server) describe(w http.ResponseWriter, r *http.Request) {
	name := filepath.Base(s.run.Dir)
	if abs, err := filepath.Abs(s.run.Dir); err == nil {
		name = filepath.Base(abs)
	}
	p := page{Name: name, Tiles: []pageTile{}}
	for _, t := range s.run.Tiles {
		pt := pageTile{Name: t.Name, EPSG: t.Grid.EPSG, Layers: map[string]string{}, Files: map[string]string{},
			Classes: t.Classes, AOAThreshold: t.AOAThreshold, RGB: t.RGB}
		if pt.Classes == nil {
			pt.Classes = []Class{}
		}
		for layer, name := range t.Layers {
			pt.Layers[layer] = s.fileURL(t, layer, name)
		}
		for _, name := range t.Side {
			pt.Files[path.Base(name)] = s.fileURL(t, "", name)
		}
		p.Tiles = append(p.Tiles, pt)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	json.NewEncoder(w).Encode(p)
}
