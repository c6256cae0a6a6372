package agent

import (
	"bufio"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/edgeaip/edgeaip/protocol"
)

// Version is the agent's version, reported at registration.
const Version = "0.2.0"

// systemInfo describes this device as UFO's DeviceInfoProvider does, plus
// edgeaip's fields. Anything that cannot be read is reported as "unknown"
// or zero rather than failing registration.
func systemInfo(id string, labels map[string]string, mcp bool, tools []protocol.MCPToolInfo) protocol.SystemInfo {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	features := []string{"wasm_tools"}
	if mcp {
		features = append(features, "mcp_tools")
	}
	return protocol.SystemInfo{
		DeviceID:          id,
		Platform:          runtime.GOOS,
		OSVersion:         osVersion(),
		CPUCount:          runtime.NumCPU(),
		MemoryTotalGB:     memoryTotalGB(),
		Hostname:          host,
		IPAddress:         ipAddress(),
		SupportedFeatures: features,
		PlatformType:      "iot",
		SchemaVersion:     "1.0",
		CustomMetadata:    map[string]any{},
		Arch:              runtime.GOARCH,
		AgentVersion:      Version,
		Labels:            labels,
		Tools:             tools,
	}
}

func osVersion() string {
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		return strings.TrimSpace(string(b))
	}
	return "unknown"
}

func memoryTotalGB() float64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, _ := strconv.ParseFloat(fields[1], 64)
			return float64(int(kb/1024/1024*100)) / 100
		}
	}
	return 0
}

// ipAddress is the first non-loopback IPv4 address, or "unknown".
func ipAddress() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "unknown"
	}
	for _, a := range addrs {
		if ip, ok := a.(*net.IPNet); ok && !ip.IP.IsLoopback() && ip.IP.To4() != nil {
			return ip.IP.String()
		}
	}
	return "unknown"
}
