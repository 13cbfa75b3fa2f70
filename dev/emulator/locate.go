package emulator

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Environment variables that override where Locate looks.
const (
	// EnvFirestoreJar names the Firestore emulator jar
	// (cloud-firestore-emulator.jar) to use instead of the installed one.
	EnvFirestoreJar = "FLEXSLURM_FIRESTORE_EMULATOR_JAR"
	// EnvPubSubBin names the Pub/Sub emulator start script
	// (…/pubsub-emulator/bin/cloud-pubsub-emulator) to use instead of the
	// installed one.
	EnvPubSubBin = "FLEXSLURM_PUBSUB_EMULATOR_BIN"
)

// Debian packages that provide the emulators and Java.
const (
	firestorePackage = "google-cloud-cli-firestore-emulator"
	pubsubPackage    = "google-cloud-cli-pubsub-emulator"
	javaPackage      = "openjdk-17-jre-headless"
)

// Errors returned (wrapped) by Locate and the Start functions when a piece is
// missing. Test with errors.Is; the message says how to install it.
var (
	ErrFirestoreNotFound = errors.New("Firestore emulator not found") //lint:ignore ST1005 a product name
	ErrPubSubNotFound    = errors.New("Pub/Sub emulator not found")
	ErrJavaNotFound      = errors.New("java not found")
)

// Paths are the installed files needed to run the emulators.
type Paths struct {
	// FirestoreJar is cloud-firestore-emulator.jar, run with
	// `java -cp JAR com.google.cloud.datastore.emulator.firestore.CloudFirestore`.
	FirestoreJar string
	// PubSubBin is the cloud-pubsub-emulator start script; it execs java.
	PubSubBin string
	// Java is the java executable (Java 17 or later).
	Java string
}

// Locate finds the Firestore emulator jar, the Pub/Sub emulator script and
// java. Each is looked up, in order, through its environment override
// (EnvFirestoreJar, EnvPubSubBin, JAVA_HOME), the Debian package's file list
// (dpkg -L), the Cloud SDK root reported by `gcloud info`, and well-known
// locations (PATH and /usr/lib/jvm for java).
//
// Locate returns every path it found, and, when something is missing, an
// error joining one entry per missing piece (ErrFirestoreNotFound,
// ErrPubSubNotFound, ErrJavaNotFound) that says how to get it. An override
// that names a missing file is an error, not a fallback.
func Locate() (Paths, error) {
	return systemLocator().locate()
}

// locator holds the system access Locate needs, so tests can replace it.
type locator struct {
	getenv   func(string) string
	lookPath func(string) (string, error)
	// output runs a command with extra environment variables and returns
	// its standard output.
	output  func(env []string, name string, args ...string) ([]byte, error)
	isFile  func(string) bool
	jvmRoot string
	sdkRoot func() string // memoized `gcloud info` answer; "" when unknown
}

func systemLocator() *locator {
	return &locator{
		getenv:   os.Getenv,
		lookPath: exec.LookPath,
		output: func(env []string, name string, args ...string) ([]byte, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, name, args...)
			cmd.Env = append(os.Environ(), env...)
			return cmd.Output()
		},
		isFile:  isRegularFile,
		jvmRoot: "/usr/lib/jvm",
	}
}

func isRegularFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

func (l *locator) locate() (Paths, error) {
	var p Paths
	var errs []error
	var err error
	if p.FirestoreJar, err = l.firestoreJar(); err != nil {
		errs = append(errs, err)
	}
	if p.PubSubBin, err = l.pubsubBin(); err != nil {
		errs = append(errs, err)
	}
	if p.Java, err = l.java(); err != nil {
		errs = append(errs, err)
	}
	return p, errors.Join(errs...)
}

func (l *locator) firestoreJar() (string, error) {
	const rel = "platform/cloud-firestore-emulator/cloud-firestore-emulator.jar"
	return l.find(ErrFirestoreNotFound, EnvFirestoreJar, firestorePackage, "/cloud-firestore-emulator.jar", rel)
}

func (l *locator) pubsubBin() (string, error) {
	const rel = "platform/pubsub-emulator/bin/cloud-pubsub-emulator"
	return l.find(ErrPubSubNotFound, EnvPubSubBin, pubsubPackage, "/bin/cloud-pubsub-emulator", rel)
}

// find looks for one emulator file through env, the package's file list and
// the SDK root, in that order.
func (l *locator) find(sentinel error, env, pkg, suffix, sdkRel string) (string, error) {
	if v := l.getenv(env); v != "" {
		if !l.isFile(v) {
			return "", fmt.Errorf("%w: %s=%s is not a file", sentinel, env, v)
		}
		return v, nil
	}
	if out, err := l.output(nil, "dpkg", "-L", pkg); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			if line := strings.TrimSpace(sc.Text()); strings.HasSuffix(line, suffix) && l.isFile(line) {
				return line, nil
			}
		}
	}
	roots := []string{l.sdk(), "/usr/lib/google-cloud-sdk", "/usr/share/google-cloud-sdk"}
	for _, root := range roots {
		if root == "" {
			continue
		}
		if p := filepath.Join(root, sdkRel); l.isFile(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: install the Debian package %s (part of the Google Cloud CLI; its apt source must be enabled) or set %s",
		sentinel, pkg, env)
}

// sdk returns the Cloud SDK root from `gcloud info`, asking at most once.
func (l *locator) sdk() string {
	if l.sdkRoot != nil {
		return l.sdkRoot()
	}
	var root string
	if gcloud, err := l.lookPath("gcloud"); err == nil {
		// A scratch config keeps gcloud from writing ~/.config/gcloud.
		if cfg, err := os.MkdirTemp("", "flexslurm-gcloud-"); err == nil {
			out, err := l.output([]string{"CLOUDSDK_CONFIG=" + cfg}, gcloud, "info", "--format=value(installation.sdk_root)")
			if err == nil {
				root = strings.TrimSpace(string(out))
			}
			_ = os.RemoveAll(cfg)
		}
	}
	l.sdkRoot = func() string { return root }
	return root
}

// java finds a java executable: $JAVA_HOME/bin/java, then PATH, then the
// newest-looking JVM under /usr/lib/jvm, preferring Java 17 (the version the
// emulators are run with here).
func (l *locator) java() (string, error) {
	if home := l.getenv("JAVA_HOME"); home != "" {
		if p := filepath.Join(home, "bin", "java"); l.isFile(p) {
			return p, nil
		}
	}
	if p, err := l.lookPath("java"); err == nil {
		return p, nil
	}
	if l.jvmRoot != "" {
		matches, _ := filepath.Glob(filepath.Join(l.jvmRoot, "*", "bin", "java"))
		sort.SliceStable(matches, func(i, j int) bool {
			return strings.Contains(matches[i], "-17-") && !strings.Contains(matches[j], "-17-")
		})
		for _, m := range matches {
			if l.isFile(m) {
				return m, nil
			}
		}
	}
	return "", fmt.Errorf("%w: apt-get install %s (or set JAVA_HOME)", ErrJavaNotFound, javaPackage)
}

// javaHome returns the JDK/JRE directory of a java executable, following
// symbolic links (/usr/bin/java → /usr/lib/jvm/…/bin/java).
func javaHome(java string) string {
	if resolved, err := filepath.EvalSymlinks(java); err == nil {
		java = resolved
	}
	return filepath.Dir(filepath.Dir(java))
}
