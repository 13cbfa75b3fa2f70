package computesim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/flexslurm/flexslurm/shared/clock"
)

// DefaultTickInterval is how often (wall time) ListenAndServe ticks the
// simulator.
const DefaultTickInterval = 100 * time.Millisecond

// Server serves a Sim over HTTP on a real listener. The embedded *Sim gives
// access to Tick, NextDue, the introspection methods and error injection.
type Server struct {
	*Sim

	mu  sync.Mutex
	srv *http.Server
	url string
}

// NewServer returns a server for a new simulator; call Start to listen.
func NewServer(opts Options, clk clock.Clock) *Server {
	return &Server{Sim: New(opts, clk)}
}

// Start listens on addr (for example "127.0.0.1:8787", or "127.0.0.1:0" for a
// free port) and serves in the background until Close.
func (s *Server) Start(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: s.Sim, ReadHeaderTimeout: 10 * time.Second}
	s.mu.Lock()
	s.srv, s.url = srv, "http://"+ln.Addr().String()
	s.mu.Unlock()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.opts.Logger.Error("computesim: serving", "addr", ln.Addr().String(), "err", err)
		}
	}()
	return nil
}

// URL is the server's base URL ("http://host:port"), the value to pass to
// option.WithEndpoint. It is "" before Start.
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.url
}

// Close stops the server at once.
func (s *Server) Close() error {
	s.mu.Lock()
	srv := s.srv
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	return srv.Close()
}

// Run calls Tick(clock.Now()) every `every` of wall time until ctx is done,
// so that transitions happen on time in live mode even when nobody calls the
// API.
func (s *Server) Run(ctx context.Context, every time.Duration) {
	if every <= 0 {
		every = DefaultTickInterval
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.Tick(s.clk.Now())
		}
	}
}

// ListenAndServe runs a simulator on addr with clock clk, ticking it every
// DefaultTickInterval, until ctx is done; then it shuts the server down and
// returns nil. It returns an error if it cannot listen.
func ListenAndServe(ctx context.Context, addr string, opts Options, clk clock.Clock) error {
	s := NewServer(opts, clk)
	if err := s.Start(addr); err != nil {
		return err
	}
	s.opts.Logger.Info("computesim: serving Compute Engine API", "url", s.URL())
	s.Run(ctx, DefaultTickInterval)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.mu.Lock()
	srv := s.srv
	s.mu.Unlock()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutting down compute simulator: %w", err)
	}
	return nil
}
