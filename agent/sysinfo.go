package agent

import (
	"bufio"
	"context"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/edgeaip/edgeaip/agent/internal/computer"
	"github.com/edgeaip/edgeaip/internal/version"
	"github.com/edgeaip/edgeaip/protocol"
)

// systemInfo describes the device with the tools of its default Computer,
// as the link registers it. The modules refused since start are listed in
// custom_metadata.refused_tools, so that the operator sees why a tool is
// missing; the rollouts on the device and the modules it keeps for them
// in custom_metadata.rollouts and .modules, so that the server knows
// what to stage and apply.
func (a *Agent) systemInfo() protocol.SystemInfo {
	var tools []protocol.MCPToolInfo
	if c, err := a.computers.Get(context.Background(), computer.Target{}); err == nil {
		tools = c.ListTools("", "", false)
	}
	info := hostInfo(a.cfg.ID, a.cfg.Labels, len(a.cfg.MCP) > 0, tools)
	rollouts, modules := a.tools.Rollouts()
	protocol.AddRolloutMetadata(info.CustomMetadata, rollouts, modules)
	if a.updater != nil {
		protocol.AddAgentUpdateMetadata(info.CustomMetadata, a.updater.Report())
	}
	if refusals := a.tools.Refusals(); len(refusals) > 0 {
		refused := make([]any, len(refusals))
		for i, r := range refusals {
			refused[i] = map[string]any{"path": r.Path, "error": r.Error}
		}
		info.CustomMetadata["refused_tools"] = refused
	}
	return info
}

// hostInfo describes this device as UFO's DeviceInfoProvider does, plus
// edgeaip's fields. Anything that cannot be read is reported as "unknown"
// or zero rather than failing registration.
func hostInfo(id string, labels map[string]string, mcp bool, tools []protocol.MCPToolInfo) protocol.SystemInfo {
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
		AgentVersion:      version.Version(),
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
