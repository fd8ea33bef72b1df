// Fast RTL harness: Verilated NdpCores, their two clocks, the DRAM each talks to and a host
// driver per core, run from Python with one call per batch of work ("run until idle").
//
// What it does (cosim/rtl/harness.py is the Python side and documents the API)
//   * Tops: one core (ndp_harness_top, NDPH_N_CORES 1) or NDPH_N_CORES cores joined in a
//     DIMM-Link chain (cosim/rtl/system_top.py's link_system, NDPH_N_LINKS = cores - 1). The
//     generated harness_ports.h binds each core's ports (CorePorts) and each link end's
//     serial side and counters (LinkEndPorts); everything below works on those bindings.
//   * Clocks: the NDP clock (NDPH_NDP_PERIOD_PS, 1000 ps) and the DRAM clock
//     (NDPH_DRAM_PERIOD_PS, 625 ps for DDR4-3200), each high for period/2 (rounded down)
//     from t = 0, as cosim/benches/dram_device.start_clocks does; both resets are held
//     for the first 4 NDP rising edges. The model is evaluated at every edge of either
//     clock (edges at the same instant share one evaluation).
//   * DRAM, one per core: cosim/rtl/benches/dram_device.py's DramDevice, rule for rule, in C++:
//     at every DRAM falling edge it reads the controller's per-rank commands, checks each
//     with the C++ TimingChecker (cosim/dram/cpp/dram_model.h; refresh deadlines first, as
//     DramModel.command does, and every 256 idle cycles), keeps data in the SparseStore
//     (addresses from the coordinate with hw/memory/address_map.py's scheme and bank rotation),
//     drives read data on dq_rd exactly tCL cycles after its RD, takes write data from
//     dq_wr exactly CWL cycles after its WR, and checks the controller's data marks
//     (data_valid, dq_wr_en) against those cycles. resp_overflow must stay low.
//   * Host driver, one per core (at NDP falling edges, as the cocotb NdpCoreTB does): CSR
//     requests one at a time on the csr stream (reads wait for csr_resp); descriptors
//     staged in DESC0..3 and pushed with DESC_PUSH while fewer than NDPH_DESC_QUEUE are
//     outstanding (pushed and not yet collected, so a push never meets a full queue); when
//     irq is high it reads CQ_HEAD, CQ_CYCLES, CQ_DRAM_BYTES and writes CQ_POP. 64 B
//     pass-through accesses on the host port, responses matched by tag; background reads
//     (ndph_host_stream) issued every N cycles without a call per read.
//   * DIMM-Link channels (link builds): at every NDP falling edge each direction of each
//     link moves the lanes from one end's serial_tx to the other's serial_rx as
//     cosim/link/channel.py's LinkChannel.step does (bit errors at a BER from a seeded
//     generator, geometric gaps between errors; a random bit offset per lane, so the PHY
//     must find block boundaries and deskew; a delay line of `latency` cycles), as the
//     cocotb link_system bench does.
//   * Waveforms: built with NDPH_TRACE (a separate library), a VCD of a window of NDP
//     cycles.
//
// Every call returns a status; after an error ndph_error() holds the text. After a DRAM
// timing violation or a protocol error the harness refuses to run further (the design
// state is no longer meaningful): the Python side reports the error and the backend must
// be rebuilt.
#include "harness_config.h"   // generated per build by cosim/rtl/harness.py
#include "dram_model.h"

#include "Vtop.h"
#include "verilated.h"
#include "harness_ports.h"  // generated: CorePorts / LinkEndPorts bindings
#ifdef NDPH_TRACE
#include "verilated_vcd_c.h"
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

double sc_time_stamp() { return 0; }   // Verilator's legacy hook; time is kept in the context

namespace {

enum Status : int32_t {
    NDPH_OK = 0,            // idle: everything submitted has completed
    NDPH_MAX_CYCLES = 1,    // stopped after max_cycles with work still pending
    NDPH_VIOLATION = 2,     // the DRAM timing checker rejected a command
    NDPH_PROTOCOL = 3,      // the design broke the pin protocol the harness checks
    NDPH_VALUE_ERROR = 4,   // bad argument (address, size, register)
    NDPH_DEAD = 5,          // refused: an earlier violation/protocol error stopped the harness
};

// ---- bits of Verilated ports -----------------------------------------------------------
// A port up to 64 bits is an integer; wider ports are VlWide<N> (32-bit words, LSW first).
template <typename T>
inline void port_words(const T& v, uint32_t* w) {
    static_assert(std::is_integral<T>::value, "narrow port");
    uint64_t x = uint64_t(v);
    w[0] = uint32_t(x);
    if (sizeof(T) > 4) w[1] = uint32_t(x >> 32);
}
template <std::size_t N>
inline void port_words(const VlWide<N>& v, uint32_t* w) {
    for (std::size_t i = 0; i < N; ++i) w[i] = v[i];
}
template <typename T>
inline void set_port_words(T& p, const uint32_t* w) {
    static_assert(std::is_integral<T>::value, "narrow port");
    uint64_t x = w[0];
    if (sizeof(T) > 4) x |= uint64_t(w[1]) << 32;
    p = T(x);
}
template <std::size_t N>
inline void set_port_words(VlWide<N>& p, const uint32_t* w) {
    for (std::size_t i = 0; i < N; ++i) p[i] = w[i];
}
template <typename T> struct PortWords { static constexpr int n = sizeof(T) > 4 ? 2 : 1; };
template <std::size_t N> struct PortWords<VlWide<N>> { static constexpr int n = int(N); };
#define NDPH_WORDS(port) PortWords<std::decay_t<decltype(port)>>::n

inline uint64_t get_bits(const uint32_t* w, int lsb, int width) {
    uint64_t v = 0;
    for (int done = 0; done < width;) {
        int bit = lsb + done, word = bit >> 5, off = bit & 31;
        int take = std::min(32 - off, width - done);
        uint64_t chunk = (uint64_t(w[word]) >> off) & ((uint64_t(1) << take) - 1);
        v |= chunk << done;
        done += take;
    }
    return v;
}
inline void set_bits(uint32_t* w, int lsb, int width, uint64_t v) {
    for (int done = 0; done < width;) {
        int bit = lsb + done, word = bit >> 5, off = bit & 31;
        int take = std::min(32 - off, width - done);
        uint32_t mask = uint32_t(((uint64_t(1) << take) - 1) << off);
        w[word] = (w[word] & ~mask) | (uint32_t((v >> done) << off) & mask);
        done += take;
    }
}
inline void get_bytes(const uint32_t* w, int lsb, uint8_t* out, int n) {
    for (int i = 0; i < n; ++i) out[i] = uint8_t(get_bits(w, lsb + 8 * i, 8));
}
inline void set_bytes(uint32_t* w, int lsb, const uint8_t* in, int n) {
    for (int i = 0; i < n; ++i) set_bits(w, lsb + 8 * i, 8, in[i]);
}

constexpr int kBurst = 64;
constexpr int kBurstWords = kBurst / 4;

struct CsrOp {
    enum Kind { USER, USER_BATCH, DESC, CQ_HEAD, CQ_CYCLES, CQ_BYTES, CQ_POP } kind;
    uint32_t addr;
    bool write;
    uint64_t data;
};

struct Completion {
    int64_t head, cycles, dram_bytes, done_cycle;
};

struct HostOp {
    uint64_t id;           // per-core sequence number
    bool write;
    int64_t addr;
    uint8_t data[kBurst];
    bool done = false;
    bool background = false;   // a ndph_host_stream read: counted, not kept
};

struct DueRead { int64_t cycle; int rank; uint8_t data[kBurst]; };
struct DueWrite { int64_t cycle; int rank; int64_t addr; };

// Background host reads: one 64 B read every `spacing` NDP cycles over [addr, addr + bytes).
struct HostStream {
    bool on = false;
    int64_t addr = 0, bytes = 0, spacing = 1, next_offset = 0, next_cycle = 0;
    int64_t issued = 0, completed = 0, latency_sum = 0, latency_max = 0;
    int64_t generation = 0;   // reads of an earlier stream are not counted in this one
};

}  // namespace

struct ndph;

// One NDP core of the simulation: its ports, the DRAM behind it and its host driver.
struct Core {
    int index = 0;
    CorePorts p{};
    std::unique_ptr<ndpdram::TimingChecker> checker;
    std::unique_ptr<ndpdram::SparseStore> store;

    // DRAM device
    std::deque<DueRead> reads_due;
    std::deque<DueWrite> writes_due;
    int64_t counts[6] = {};       // NOP unused; ACT RD WR PRE REF by DramCommand value
    int64_t bursts_read = 0, bursts_written = 0;

    // host driver: CSR
    std::deque<CsrOp> csr_queue;
    bool csr_presented = false, csr_ready_seen = false, csr_wait_resp = false;
    CsrOp csr_current{};
    bool user_done = false;
    uint64_t user_value = 0;
    std::vector<uint64_t> batch_values;   // ndph_csr_reads: values of the reads done so far
    size_t batch_expected = 0;
    // descriptors
    std::deque<std::vector<uint64_t>> desc_pending;   // 4 x 64-bit words each
    int64_t pushed = 0, collected = 0;
    bool collecting = false;
    Completion partial{};
    std::vector<Completion> completions;
    // host port
    std::deque<HostOp> host_queue;
    std::unordered_map<uint64_t, HostOp> host_wait;    // by tag
    std::unordered_map<uint64_t, std::pair<int64_t, int64_t>> host_issued;   // background reads by id: cycle, generation
    std::vector<HostOp> host_done;
    uint64_t host_next_id = 0;
    bool host_presented = false, host_ready_seen = false;
    HostOp host_current{};
    HostStream stream;

    bool csr_busy() const { return csr_presented || csr_wait_resp || !csr_queue.empty(); }
    // Idle: every descriptor and access submitted has completed (a background host stream
    // does not count: it runs until stopped).
    bool idle() const {
        bool foreground_host = false;
        for (const HostOp& op : host_queue) foreground_host |= !op.background;
        for (const auto& kv : host_wait) foreground_host |= !kv.second.background;
        if (host_presented && !host_current.background) foreground_host = true;
        return desc_pending.empty() && pushed == collected && !collecting && !csr_busy() &&
               !foreground_host;
    }
};

#if NDPH_N_LINKS
// One direction of one DIMM-Link: `from`'s serial_tx -> `to`'s serial_rx (LinkChannel.step
// without drops or lane permutations).
struct Channel {
    LinkEndPorts from{}, to{};
    int latency = 0;
    double ber = 0;
    std::mt19937_64 rng;
    std::deque<int64_t> line[NDPH_LINK_LANES];   // -1: no chunk in that cycle
    int64_t bits_in[NDPH_LINK_LANES] = {};
    int offset[NDPH_LINK_LANES] = {};            // bits each lane's stream is delayed by
    unsigned __int128 carry[NDPH_LINK_LANES] = {};
    int64_t next_error[NDPH_LINK_LANES] = {};    // -1: no error to come (ber 0)
    int64_t injected = 0, chunks = 0;

    int64_t gap() {
        if (ber <= 0) return -1;
        double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
        return int64_t(std::log(1.0 - u) / std::log(1.0 - ber));
    }
    void configure(int lat, double b, uint64_t seed, int max_offset) {
        latency = lat; ber = b; rng.seed(seed);
        for (int i = 0; i < NDPH_LINK_LANES; ++i) {
            line[i].assign(size_t(lat), -1);
            bits_in[i] = 0;
            offset[i] = max_offset ? int(rng() % uint64_t(max_offset + 1)) : 0;
            carry[i] = 0;
            for (int k = 0; k < offset[i]; ++k)    // filler bits ahead of the stream
                carry[i] |= (unsigned __int128)(rng() & 1) << k;
            next_error[i] = gap();
        }
    }
    uint32_t errors(int lane, uint32_t chunk) {
        const int64_t start = bits_in[lane], end = start + NDPH_LINK_CHUNK_BITS;
        int64_t g = next_error[lane];
        while (g >= 0 && g < end) {
            if (g >= start) { chunk ^= uint32_t(1) << (g - start); injected++; }
            g += 1 + gap();
        }
        next_error[lane] = g;
        bits_in[lane] = end;
        return chunk;
    }
    // One NDP cycle. Returns whether the receiver's inputs changed.
    bool step() {
        uint32_t tx[(NDPH_LINK_LANES * NDPH_LINK_CHUNK_BITS + 31) / 32];
        port_words(*from.serial_tx, tx);
        const uint32_t valid = uint32_t(*from.serial_tx_valid);
        uint32_t rx[sizeof(tx) / 4] = {};
        uint32_t rx_valid = 0;
        for (int i = 0; i < NDPH_LINK_LANES; ++i) {
            int64_t moved = -1;
            if ((valid >> i) & 1) {
                moved = errors(i, uint32_t(get_bits(tx, i * NDPH_LINK_CHUNK_BITS, NDPH_LINK_CHUNK_BITS)));
                chunks++;
                if (offset[i]) {
                    const unsigned __int128 pending = carry[i] | ((unsigned __int128)moved << offset[i]);
                    moved = int64_t(uint64_t(pending) & ((uint64_t(1) << NDPH_LINK_CHUNK_BITS) - 1));
                    carry[i] = pending >> NDPH_LINK_CHUNK_BITS;
                }
            }
            if (latency) {
                line[i].push_back(moved);
                moved = line[i].front();
                line[i].pop_front();
            }
            if (moved >= 0) {
                set_bits(rx, i * NDPH_LINK_CHUNK_BITS, NDPH_LINK_CHUNK_BITS, uint64_t(moved));
                rx_valid |= 1u << i;
            }
        }
        uint32_t before[sizeof(tx) / 4];
        port_words(*to.serial_rx, before);
        bool changed = uint32_t(*to.serial_rx_valid) != rx_valid ||
                       std::memcmp(before, rx, sizeof(rx)) != 0;
        if (changed) {
            set_port_words(*to.serial_rx, rx);
            *to.serial_rx_valid = rx_valid;
        }
        return changed;
    }
};
#endif

struct ndph {
    std::unique_ptr<VerilatedContext> ctx;
    std::unique_ptr<Vtop> top;
    std::vector<std::unique_ptr<Core>> cores;
#if NDPH_N_LINKS
    std::vector<Channel> channels;   // 2 per link: [2 l] a -> b, [2 l + 1] b -> a
#endif
#ifdef NDPH_TRACE
    std::unique_ptr<VerilatedVcdC> trace;
    int64_t trace_from = 0, trace_to = -1;   // NDP cycles
#endif
    std::string error;
    bool dead = false;

    // time
    int64_t time_ps = 0;
    int64_t next_ndp_edge = 0, next_dram_edge = 0;   // next edge times
    bool ndp_high = false, dram_high = false;          // level after the next edge? see step()
    int64_t ndp_cycle = 0;        // NDP rising edges since reset was released
    int64_t dram_cycle = 0;       // DRAM falling edges since reset was released (checker cycle)
    int reset_edges = 0;
    bool in_reset = true;

    // where the clocking loop's time goes, by the steady clock (ndph_profile): off by default
    bool profile = false;
    int64_t eval_ns = 0;     // inside the Verilated model's eval()
    int64_t loop_ns = 0;     // inside run_until's loop (eval + DRAM model + drivers + channels)
    int64_t evals = 0;

    bool idle() const {
        for (const auto& c : cores) if (!c->idle()) return false;
        return true;
    }
};

namespace {

int32_t fail(ndph* h, int32_t status, std::string msg) {
    h->error = std::move(msg);
    if (status == NDPH_VIOLATION || status == NDPH_PROTOCOL) h->dead = true;
    return status;
}

// Error text naming the core in a system of several.
std::string where(const Core& c) {
    return NDPH_N_CORES > 1 ? "core " + std::to_string(c.index) + ": " : std::string();
}

int64_t encode_address(int64_t rank, int64_t bg, int64_t bank, int64_t row, int64_t column) {
    int64_t bank_field = NDPH_BANK_ROTATE ? ((bank - row) & (NDPH_BANKS_PER_GROUP - 1)) : bank;
    return (column << NDPH_AM_COLUMN_LSB) | (bg << NDPH_AM_BANK_GROUP_LSB) |
           (bank_field << NDPH_AM_BANK_LSB) | (rank << NDPH_AM_RANK_LSB) | (row << NDPH_AM_ROW_LSB);
}

int32_t checker_error(ndph* h, Core& k) {
    return fail(h, NDPH_VIOLATION, where(k) + "DRAM timing checker: " + k.checker->message());
}

// One DRAM falling edge of core k: dram_device.py's DramDevice.run loop body.
int32_t dram_fall(ndph* h, Core& k) {
    const CorePorts& p = k.p;
    const int64_t c = h->dram_cycle;
    uint32_t cmdw[NDPH_WORDS(*p.cmd)];
    port_words(*p.cmd, cmdw);
    bool any = false;
    for (uint32_t w : cmdw) any |= w != 0;
    if (any) {
        for (int r = 0; r < NDPH_RANKS; ++r) {
            const int base = r * NDPH_CMD_BITS;
            const int kind = int(get_bits(cmdw, base + NDPH_CMD_KIND_LSB, NDPH_CMD_KIND_WIDTH));
            if (kind == NDPH_KIND_NOP) continue;
            const int64_t bg = int64_t(get_bits(cmdw, base + NDPH_CMD_BG_LSB, NDPH_CMD_BG_WIDTH));
            const int64_t bank = int64_t(get_bits(cmdw, base + NDPH_CMD_BANK_LSB, NDPH_CMD_BANK_WIDTH));
            const int64_t row = int64_t(get_bits(cmdw, base + NDPH_CMD_ROW_LSB, NDPH_CMD_ROW_WIDTH));
            const int64_t col = int64_t(get_bits(cmdw, base + NDPH_CMD_COL_LSB, NDPH_CMD_COL_WIDTH));
            if (kind < 0 || kind > 5)
                return fail(h, NDPH_PROTOCOL, where(k) + "DRAM cycle " + std::to_string(c) + ": rank " +
                            std::to_string(r) + " command kind " + std::to_string(kind) + " undefined");
            k.counts[kind]++;
            if (k.checker->check_refresh(c) != ndpdram::Status::OK) return checker_error(h, k);
            ndpdram::Status st;
            using ndpdram::Command;
            if (kind == NDPH_KIND_RD) {
                st = k.checker->issue(c, Command::RD, r, bg, bank, row, col);
                if (st != ndpdram::Status::OK) return checker_error(h, k);
                DueRead d{c + NDPH_T_CL, r, {}};
                if (k.store->read(encode_address(r, bg, bank, row, col), kBurst, d.data) !=
                    ndpdram::Status::OK)
                    return fail(h, NDPH_PROTOCOL, where(k) + "DRAM store: " + k.store->message());
                k.reads_due.push_back(d);
            } else if (kind == NDPH_KIND_WR) {
                st = k.checker->issue(c, Command::WR, r, bg, bank, row, col);
                if (st != ndpdram::Status::OK) return checker_error(h, k);
                k.writes_due.push_back(DueWrite{c + NDPH_CWL, r, encode_address(r, bg, bank, row, col)});
            } else if (kind == NDPH_KIND_REF) {
                st = k.checker->issue(c, Command::REF, r);
                if (st != ndpdram::Status::OK) return checker_error(h, k);
            } else {
                st = k.checker->issue(c, kind == NDPH_KIND_ACT ? Command::ACT : Command::PRE, r, bg,
                                      bank, row);
                if (st != ndpdram::Status::OK) return checker_error(h, k);
            }
        }
    } else if (c % 256 == 0) {
        if (k.checker->check_refresh(c) != ndpdram::Status::OK) return checker_error(h, k);
    }
    uint32_t expect = 0;
    for (const DueRead& d : k.reads_due) {
        if (d.cycle != c) break;
        expect |= 1u << d.rank;
    }
    for (const DueWrite& d : k.writes_due) {
        if (d.cycle != c) break;
        expect |= 1u << d.rank;
    }
    const uint32_t marks = uint32_t(*p.data_valid);
    if (marks != expect) {
        auto bits = [](uint32_t v) {
            std::string s;
            for (int r = NDPH_RANKS - 1; r >= 0; --r) s += ((v >> r) & 1) ? '1' : '0';
            return s;
        };
        return fail(h, NDPH_PROTOCOL, where(k) + "DRAM cycle " + std::to_string(c) +
                    ": controller data marks " + bits(marks) + ", DRAM data cycles " + bits(expect));
    }
    if (!k.writes_due.empty() && k.writes_due.front().cycle == c) {
        uint32_t dq[NDPH_WORDS(*p.dq_wr)];
        port_words(*p.dq_wr, dq);
        const uint32_t wr_en = uint32_t(*p.dq_wr_en);
        while (!k.writes_due.empty() && k.writes_due.front().cycle == c) {
            const DueWrite d = k.writes_due.front();
            k.writes_due.pop_front();
            if (!((wr_en >> d.rank) & 1))
                return fail(h, NDPH_PROTOCOL, where(k) + "DRAM cycle " + std::to_string(c) + ": rank " +
                            std::to_string(d.rank) + " write data not driven");
            uint8_t bytes[kBurst];
            std::memcpy(bytes, dq + d.rank * kBurstWords, kBurst);   // little-endian host
            if (k.store->write(d.addr, bytes, kBurst) != ndpdram::Status::OK)
                return fail(h, NDPH_PROTOCOL, where(k) + "DRAM store: " + k.store->message());
            k.bursts_written++;
        }
    }
    while (!k.reads_due.empty() && k.reads_due.front().cycle == c) {
        const DueRead& d = k.reads_due.front();
        uint32_t words[kBurstWords];
        std::memcpy(words, d.data, kBurst);
        for (int i = 0; i < kBurstWords; ++i) (*p.dq_rd)[d.rank * kBurstWords + i] = words[i];
        k.bursts_read++;
        k.reads_due.pop_front();
    }
    if (*p.resp_overflow)
        return fail(h, NDPH_PROTOCOL, where(k) + "DRAM cycle " + std::to_string(c) +
                    ": the memory system's response buffer overflowed (resp_overflow)");
    return NDPH_OK;
}

void csr_enqueue_desc(Core& k) {
    const std::vector<uint64_t> words = k.desc_pending.front();
    k.desc_pending.pop_front();
    for (int i = 0; i < 4; ++i)
        k.csr_queue.push_back(CsrOp{CsrOp::DESC, uint32_t(NDPH_REG_DESC0 + 8 * i), true, words[i]});
    k.csr_queue.push_back(CsrOp{CsrOp::DESC, NDPH_REG_DESC_PUSH, true, 1});
    k.pushed++;
}

void csr_enqueue_collect(Core& k) {
    k.collecting = true;
    k.csr_queue.push_back(CsrOp{CsrOp::CQ_HEAD, NDPH_REG_CQ_HEAD, false, 0});
    k.csr_queue.push_back(CsrOp{CsrOp::CQ_CYCLES, NDPH_REG_CQ_CYCLES, false, 0});
    k.csr_queue.push_back(CsrOp{CsrOp::CQ_BYTES, NDPH_REG_CQ_DRAM_BYTES, false, 0});
    k.csr_queue.push_back(CsrOp{CsrOp::CQ_POP, NDPH_REG_CQ_POP, true, 1});
}

// A CSR operation of core k has finished (a write accepted, or a read answered with value).
int32_t csr_finished(ndph* h, Core& k, const CsrOp& op, uint64_t value) {
    switch (op.kind) {
    case CsrOp::USER: k.user_done = true; k.user_value = value; break;
    case CsrOp::USER_BATCH:
        k.batch_values.push_back(value);
        if (k.batch_values.size() == k.batch_expected) k.user_done = true;
        break;
    case CsrOp::DESC: break;
    case CsrOp::CQ_HEAD:
        if (!(value & 1))
            return fail(h, NDPH_PROTOCOL, where(k) + "irq was high but CQ_HEAD holds no completion");
        k.partial.head = int64_t(value);
        break;
    case CsrOp::CQ_CYCLES: k.partial.cycles = int64_t(value); break;
    case CsrOp::CQ_BYTES: k.partial.dram_bytes = int64_t(value); break;
    case CsrOp::CQ_POP:
        k.partial.done_cycle = h->ndp_cycle;
        k.completions.push_back(k.partial);
        k.collected++;
        k.collecting = false;
        break;
    }
    return NDPH_OK;
}

// The background stream's next read, when it is due.
void stream_issue(ndph* h, Core& k) {
    HostStream& s = k.stream;
    if (!s.on || h->ndp_cycle < s.next_cycle) return;
    HostOp op{};
    op.id = k.host_next_id++;
    op.write = false;
    op.addr = s.addr + s.next_offset;
    op.background = true;
    k.host_issued[op.id] = {h->ndp_cycle, s.generation};
    k.host_queue.push_back(op);
    s.issued++;
    s.next_offset = (s.next_offset + kBurst) % s.bytes;
    s.next_cycle = h->ndp_cycle + s.spacing;
}

// One NDP falling edge of core k: its host driver. Sets *changed when it changed an input.
int32_t ndp_fall(ndph* h, Core& k, bool* changed) {
    const CorePorts& p = k.p;
    stream_issue(h, k);
    // the request presented at the last falling edge went in at the rising edge
    if (k.csr_presented && k.csr_ready_seen) {
        k.csr_presented = false;
        if (k.csr_current.write) {
            int32_t st = csr_finished(h, k, k.csr_current, 0);
            if (st) return st;
        } else {
            k.csr_wait_resp = true;
        }
    }
    // CSR response of a read (possibly in the cycle right after its request) (ready is always 1: it transfers at the next rising edge)
    if (k.csr_wait_resp && *p.csr_resp_valid) {
        k.csr_wait_resp = false;
        uint32_t w[2];
        port_words(*p.csr_resp_payload, w);
        int32_t st = csr_finished(h, k, k.csr_current, uint64_t(w[0]) | uint64_t(w[1]) << 32);
        if (st) return st;
    }
    // host-port request likewise
    if (k.host_presented && k.host_ready_seen) {
        k.host_presented = false;
        k.host_wait.emplace(k.host_current.id & NDPH_HOST_TAG_MASK, k.host_current);
    }
    // host-port responses (ready always 1)
    for (int r = 0; r < NDPH_RANKS; ++r) {
        if (!*p.host_resp_valid[r]) continue;
        uint32_t w[NDPH_HOST_RESP_WORDS];
        port_words(*p.host_resp_payload[r], w);
        const uint64_t tag = get_bits(w, NDPH_HRESP_TAG_LSB, NDPH_HRESP_TAG_WIDTH);
        auto it = k.host_wait.find(tag);
        if (it == k.host_wait.end())
            return fail(h, NDPH_PROTOCOL, where(k) + "host response with unknown tag " + std::to_string(tag));
        HostOp op = it->second;
        k.host_wait.erase(it);
        if (op.background) {
            auto issued = k.host_issued.find(op.id);
            const int64_t latency = h->ndp_cycle - issued->second.first;
            const bool counted = issued->second.second == k.stream.generation;
            k.host_issued.erase(issued);
            if (!counted) continue;
            k.stream.completed++;
            k.stream.latency_sum += latency;
            k.stream.latency_max = std::max(k.stream.latency_max, latency);
            continue;
        }
        if (!op.write) get_bytes(w, NDPH_HRESP_DATA_LSB, op.data, kBurst);
        op.done = true;
        k.host_done.push_back(op);
    }
    // decide what the host does next
    if (!k.csr_presented && !k.csr_wait_resp) {
        if (k.csr_queue.empty()) {
            if (*p.irq && !k.collecting) csr_enqueue_collect(k);
            else if (!k.desc_pending.empty() && k.pushed - k.collected < NDPH_DESC_QUEUE)
                csr_enqueue_desc(k);
        }
        if (!k.csr_queue.empty()) {
            k.csr_current = k.csr_queue.front();
            k.csr_queue.pop_front();
            uint32_t w[NDPH_WORDS(*p.csr_payload)] = {};
            set_bits(w, NDPH_CSR_ADDR_LSB, NDPH_CSR_ADDR_WIDTH, k.csr_current.addr);
            set_bits(w, NDPH_CSR_WRITE_LSB, 1, k.csr_current.write);
            set_bits(w, NDPH_CSR_DATA_LSB, 64, k.csr_current.data);
            set_port_words(*p.csr_payload, w);
            *p.csr_valid = 1;
            k.csr_presented = true;
            *changed = true;
        } else if (*p.csr_valid) {
            *p.csr_valid = 0;
            *changed = true;
        }
    }
    if (!k.host_presented) {
        if (!k.host_queue.empty() && !k.host_wait.count(k.host_queue.front().id & NDPH_HOST_TAG_MASK)) {
            k.host_current = k.host_queue.front();
            k.host_queue.pop_front();
            uint32_t w[NDPH_HOST_REQ_WORDS] = {};
            set_bits(w, NDPH_HREQ_WRITE_LSB, 1, k.host_current.write);
            set_bits(w, NDPH_HREQ_BURST_LSB, NDPH_HREQ_BURST_WIDTH, uint64_t(k.host_current.addr) / kBurst);
            set_bits(w, NDPH_HREQ_TAG_LSB, NDPH_HREQ_TAG_WIDTH, k.host_current.id & NDPH_HOST_TAG_MASK);
            if (k.host_current.write) set_bytes(w, NDPH_HREQ_DATA_LSB, k.host_current.data, kBurst);
            set_port_words(*p.host_req_payload, w);
            *p.host_req_valid = 1;
            k.host_presented = true;
            *changed = true;
        } else if (*p.host_req_valid) {
            *p.host_req_valid = 0;
            *changed = true;
        }
    }
    return NDPH_OK;
}

int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The Verilated model's eval(), timed when profiling.
void evaluate(ndph* h) {
    if (!h->profile) { h->top->eval(); return; }
    const int64_t t0 = now_ns();
    h->top->eval();
    h->eval_ns += now_ns() - t0;
    h->evals++;
}

void dump_trace(ndph* h) {
#ifdef NDPH_TRACE
    if (h->trace && h->ndp_cycle >= h->trace_from && h->ndp_cycle <= h->trace_to)
        h->trace->dump(uint64_t(h->time_ps));
#else
    (void)h;
#endif
}

// Toggle whichever clocks have an edge now and evaluate. Sets the kinds of edge seen.
void clock_edges(ndph* h, bool* ndp_rise, bool* ndp_fall_edge, bool* dram_fall_edge) {
    Vtop* t = h->top.get();
    const int64_t now = std::min(h->next_ndp_edge, h->next_dram_edge);
    h->time_ps = now;
    h->ctx->time(uint64_t(now));
    *ndp_rise = *ndp_fall_edge = *dram_fall_edge = false;
    if (h->next_ndp_edge == now) {
        h->ndp_high = !h->ndp_high;
        t->clk = h->ndp_high;
        if (h->ndp_high) { *ndp_rise = true; h->next_ndp_edge = now + NDPH_NDP_PERIOD_PS / 2; }
        else { *ndp_fall_edge = true; h->next_ndp_edge = now + (NDPH_NDP_PERIOD_PS - NDPH_NDP_PERIOD_PS / 2); }
    }
    if (h->next_dram_edge == now) {
        h->dram_high = !h->dram_high;
        t->dram_clk = h->dram_high;
        if (h->dram_high) h->next_dram_edge = now + NDPH_DRAM_PERIOD_PS / 2;
        else { *dram_fall_edge = true; h->next_dram_edge = now + (NDPH_DRAM_PERIOD_PS - NDPH_DRAM_PERIOD_PS / 2); }
    }
    evaluate(h);
    if (*ndp_rise) {
        if (h->in_reset) {
            if (++h->reset_edges == 4) { h->in_reset = false; t->rst = 0; t->dram_rst = 0; }
        } else {
            h->ndp_cycle++;
        }
    }
}

// Advance to the next clock edge(s) and evaluate; devices, drivers and links act at falling edges.
int32_t step(ndph* h) {
    bool ndp_rise, ndp_fall_edge, dram_fall_edge;
    clock_edges(h, &ndp_rise, &ndp_fall_edge, &dram_fall_edge);
    dump_trace(h);
    if (h->in_reset) return NDPH_OK;
    bool changed = false;
    if (dram_fall_edge) {
        for (auto& k : h->cores) {
            int32_t st = dram_fall(h, *k);
            if (st) return st;
        }
        h->dram_cycle++;
    }
    if (ndp_fall_edge) {
        for (auto& k : h->cores) {
            int32_t st = ndp_fall(h, *k, &changed);
            if (st) return st;
        }
#if NDPH_N_LINKS
        for (Channel& ch : h->channels) changed |= ch.step();
#endif
    }
    if (changed) evaluate(h);   // the drivers' and channels' new inputs settle before anyone samples them
    if (ndp_fall_edge) {      // what goes in at the next rising edge
        for (auto& k : h->cores) {
            k->csr_ready_seen = k->csr_presented && *k->p.csr_ready;
            k->host_ready_seen = k->host_presented && *k->p.host_req_ready;
        }
    }
    return NDPH_OK;
}

// Run until done() or max_cycles NDP cycles have passed.
template <class Done>
int32_t run_until(ndph* h, int64_t max_cycles, Done done) {
    if (h->dead) return fail(h, NDPH_DEAD, "the harness stopped after an earlier error: " + h->error);
    const int64_t stop = h->ndp_cycle + max_cycles;
    const int64_t t0 = h->profile ? now_ns() : 0;
    int32_t st = NDPH_OK;
    while (!done()) {
        if (h->ndp_cycle >= stop) { st = NDPH_MAX_CYCLES; break; }
        st = step(h);
        if (st) break;
    }
    if (h->profile) h->loop_ns += now_ns() - t0;
    return st;
}

// The core a call names, or nullptr (and a VALUE_ERROR) when there is no such core.
Core* core_of(ndph* h, int32_t core) {
    if (core < 0 || core >= int32_t(h->cores.size())) {
        fail(h, NDPH_VALUE_ERROR, "no core " + std::to_string(core) + " in a harness of " +
             std::to_string(h->cores.size()));
        return nullptr;
    }
    return h->cores[size_t(core)].get();
}

}  // namespace

extern "C" {

const char* ndph_build_info(void) { return NDPH_BUILD_INFO; }

int32_t ndph_n_cores(void) { return NDPH_N_CORES; }

ndph* ndph_create(char* err, size_t errlen) {
    auto copy = [&](const std::string& msg) {
        if (err && errlen) { std::strncpy(err, msg.c_str(), errlen - 1); err[errlen - 1] = '\0'; }
    };
    try {
        auto h = std::make_unique<ndph>();
        h->ctx = std::make_unique<VerilatedContext>();
        h->ctx->debug(0);
        h->ctx->randReset(0);
#ifdef NDPH_TRACE
        h->ctx->traceEverOn(true);
#endif
        h->top = std::make_unique<Vtop>(h->ctx.get(), "top");
        Vtop* t = h->top.get();
        ndpdram_org org{NDPH_RANKS, NDPH_BANK_GROUPS, NDPH_BANKS_PER_GROUP, NDPH_ROWS_PER_BANK,
                        NDPH_ROW_BYTES, kBurst};
        ndpdram_timing tm{NDPH_TIMING};
        for (int i = 0; i < NDPH_N_CORES; ++i) {
            auto k = std::make_unique<Core>();
            k->index = i;
            k->p = ndph_bind_core(t, i);
            std::string e;
            k->checker = ndpdram::TimingChecker::create(org, tm, &e);
            if (!k->checker) { copy("DRAM timing checker: " + e); return nullptr; }
            k->store = ndpdram::SparseStore::create(NDPH_CAPACITY_BYTES, 4096, &e);
            if (!k->store) { copy("DRAM store: " + e); return nullptr; }
            *k->p.csr_valid = 0; *k->p.csr_resp_ready = 1; *k->p.host_req_valid = 0;
            for (int r = 0; r < NDPH_RANKS; ++r) *k->p.host_resp_ready[r] = 1;
            h->cores.push_back(std::move(k));
        }
#if NDPH_N_LINKS
        for (int l = 0; l < NDPH_N_LINKS; ++l) {
            LinkEndPorts a = ndph_bind_link_end(t, l, 0), b = ndph_bind_link_end(t, l, 1);
            *a.link_reset = 0; *b.link_reset = 0;
            Channel ab, ba;
            ab.from = a; ab.to = b; ba.from = b; ba.to = a;
            h->channels.push_back(std::move(ab));
            h->channels.push_back(std::move(ba));
        }
        for (size_t i = 0; i < h->channels.size(); ++i) h->channels[i].configure(0, 0.0, i, 0);
#endif
        t->clk = 0; t->dram_clk = 0; t->rst = 1; t->dram_rst = 1;
        t->eval();
        return h.release();
    } catch (const std::exception& ex) {
        copy(std::string("internal error: ") + ex.what());
        return nullptr;
    }
}

void ndph_destroy(ndph* h) {
    if (!h) return;
#ifdef NDPH_TRACE
    if (h->trace) h->trace->close();
#endif
    h->top->final();
    delete h;
}

const char* ndph_error(const ndph* h) { return h->error.c_str(); }

/// DIMM-Link channels (link builds): every direction gets `latency` cycles, bit errors at
/// `ber`, and per lane a bit offset drawn from 0..max_bit_offset (the generator seeded from
/// `seed` and the direction's index). Only before the first cycle.
int32_t ndph_link_configure(ndph* h, int64_t latency, double ber, uint64_t seed, int32_t max_bit_offset) {
#if NDPH_N_LINKS
    if (h->ndp_cycle > 0 || !h->in_reset)
        return fail(h, NDPH_VALUE_ERROR, "the links are configured before the first cycle");
    if (latency < 0 || latency > (1 << 20) || !(ber >= 0 && ber < 1) || max_bit_offset < 0 ||
        max_bit_offset > 90)
        return fail(h, NDPH_VALUE_ERROR, "link latency " + std::to_string(latency) + ", BER " +
                    std::to_string(ber) + " or bit offset " + std::to_string(max_bit_offset) +
                    " out of range (0..2^20 cycles, [0, 1), 0..90 bits)");
    for (size_t i = 0; i < h->channels.size(); ++i)
        h->channels[i].configure(int(latency), ber, seed * 1000003u + i, max_bit_offset);
    return NDPH_OK;
#else
    (void)latency; (void)ber; (void)seed; (void)max_bit_offset;
    return fail(h, NDPH_VALUE_ERROR, "this harness library has no DIMM-Link channels (one core)");
#endif
}

/// Counters of link `link`'s end `end` (0: a, on core `link`; 1: b, on core `link + 1`), in
/// NDPH_LINK_COUNTER_NAMES order, then the channel that end transmits into: chunks sent and
/// bit errors injected.
int32_t ndph_link_counters(ndph* h, int32_t link, int32_t end, int64_t* out) {
#if NDPH_N_LINKS
    if (link < 0 || link >= NDPH_N_LINKS || end < 0 || end > 1)
        return fail(h, NDPH_VALUE_ERROR, "no link end " + std::to_string(link) + "/" + std::to_string(end));
    LinkEndPorts e = ndph_bind_link_end(h->top.get(), link, end);
    for (int i = 0; i < NDPH_LINK_N_COUNTERS; ++i) out[i] = int64_t(*e.counters[i]);
    const Channel& ch = h->channels[size_t(2 * link + end)];
    out[NDPH_LINK_N_COUNTERS] = ch.chunks;
    out[NDPH_LINK_N_COUNTERS + 1] = ch.injected;
    return NDPH_OK;
#else
    (void)link; (void)end; (void)out;
    return fail(h, NDPH_VALUE_ERROR, "this harness library has no DIMM-Link channels (one core)");
#endif
}

/// Run until every end of every link reports link_up (trained), or max_cycles NDP cycles
/// (then MAX_CYCLES). A build without links is up at once.
int32_t ndph_run_until_links_up(ndph* h, int64_t max_cycles) {
#if NDPH_N_LINKS
    Vtop* t = h->top.get();
    return run_until(h, max_cycles, [h, t] {
        if (h->in_reset) return false;
        for (int l = 0; l < NDPH_N_LINKS; ++l)
            for (int e = 0; e < 2; ++e)
                if (!*ndph_bind_link_end(t, l, e).link_up) return false;
        return true;
    });
#else
    (void)h; (void)max_cycles;
    return NDPH_OK;
#endif
}

/// Queue n descriptors for `core` (4 x 64-bit words each, least significant first).
int32_t ndph_submit(ndph* h, int32_t core, const uint64_t* words, int64_t n) {
    Core* k = core_of(h, core);
    if (!k) return NDPH_VALUE_ERROR;
    for (int64_t i = 0; i < n; ++i) k->desc_pending.emplace_back(words + 4 * i, words + 4 * i + 4);
    return NDPH_OK;
}

/// Run until `core` is idle (every core when core < 0) or max_cycles NDP cycles. The other
/// cores keep running all along: they are one simulation.
int32_t ndph_run(ndph* h, int32_t core, int64_t max_cycles) {
    if (core < 0) return run_until(h, max_cycles, [h] { return h->idle(); });
    Core* k = core_of(h, core);
    if (!k) return NDPH_VALUE_ERROR;
    return run_until(h, max_cycles, [k] { return k->idle(); });
}

/// Clock the design for n NDP cycles, whatever it is doing (the drivers keep working).
int32_t ndph_run_cycles(ndph* h, int64_t n) {
    const int64_t stop = h->ndp_cycle + n;
    int32_t st = run_until(h, n, [h, stop] { return h->ndp_cycle >= stop; });
    return st == NDPH_MAX_CYCLES ? NDPH_OK : st;
}

/// A register access by the host of `core`; runs (work in flight continues) until it completes.
int32_t ndph_csr(ndph* h, int32_t core, uint32_t addr, int32_t write, uint64_t data, uint64_t* out,
                 int64_t max_cycles) {
    Core* k = core_of(h, core);
    if (!k) return NDPH_VALUE_ERROR;
    k->user_done = false;
    k->csr_queue.push_back(CsrOp{CsrOp::USER, addr, write != 0, data});
    int32_t st = run_until(h, max_cycles, [k] { return k->user_done; });
    if (st == NDPH_MAX_CYCLES)
        return fail(h, NDPH_PROTOCOL, where(*k) + "CSR access to " + std::to_string(addr) +
                    " did not complete in " + std::to_string(max_cycles) + " cycles");
    if (out) *out = k->user_value;
    return st;
}

/// Reads of `n` registers of `core` in one call, queued back to back on the CSR port (one
/// request outstanding at a time, as every host access); runs until the last one answered.
int32_t ndph_csr_reads(ndph* h, int32_t core, const uint32_t* addrs, int32_t n, uint64_t* out,
                       int64_t max_cycles) {
    Core* k = core_of(h, core);
    if (!k || n < 1) return NDPH_VALUE_ERROR;
    k->user_done = false;
    k->batch_values.clear();
    k->batch_expected = size_t(n);
    for (int32_t i = 0; i < n; ++i) k->csr_queue.push_back(CsrOp{CsrOp::USER_BATCH, addrs[i], false, 0});
    int32_t st = run_until(h, max_cycles, [k] { return k->user_done; });
    if (st == NDPH_MAX_CYCLES)
        return fail(h, NDPH_PROTOCOL, where(*k) + std::to_string(n) + " CSR reads did not complete in " +
                    std::to_string(max_cycles) + " cycles");
    for (int32_t i = 0; i < n; ++i) out[i] = k->batch_values[size_t(i)];
    return st;
}

/// Number of completions of `core` collected and not yet taken; copies up to n of them (oldest
/// first: head, cycles, dram_bytes, done_cycle per entry) and removes them.
int64_t ndph_completions(ndph* h, int32_t core, int64_t* out, int64_t n) {
    Core* k = core_of(h, core);
    if (!k) return -1;
    int64_t m = std::min<int64_t>(n, int64_t(k->completions.size()));
    for (int64_t i = 0; i < m; ++i) {
        const Completion& c = k->completions[size_t(i)];
        out[4 * i] = c.head; out[4 * i + 1] = c.cycles;
        out[4 * i + 2] = c.dram_bytes; out[4 * i + 3] = c.done_cycle;
    }
    k->completions.erase(k->completions.begin(), k->completions.begin() + m);
    return m;
}

int64_t ndph_pending(ndph* h, int32_t core) {
    Core* k = core_of(h, core);
    if (!k) return -1;
    return int64_t(k->desc_pending.size()) + (k->pushed - k->collected);
}

/// One 64 B host pass-through access on `core`; runs until it completes. data: 64 bytes in
/// (write) or out (read).
int32_t ndph_host_access(ndph* h, int32_t core, int32_t write, int64_t addr, uint8_t* data,
                         int64_t max_cycles) {
    Core* k = core_of(h, core);
    if (!k) return NDPH_VALUE_ERROR;
    if (addr < 0 || addr % kBurst || addr + kBurst > NDPH_CAPACITY_BYTES)
        return fail(h, NDPH_VALUE_ERROR, "host access address " + std::to_string(addr) +
                    " is not a 64 B aligned burst inside the DIMM");
    HostOp op{};
    op.id = k->host_next_id++;
    op.write = write != 0;
    op.addr = addr;
    if (op.write) std::memcpy(op.data, data, kBurst);
    const uint64_t id = op.id;
    k->host_queue.push_back(op);
    int32_t st = run_until(h, max_cycles, [k, id] {
        for (const HostOp& done : k->host_done)
            if (done.id == id) return true;
        return false;
    });
    if (st == NDPH_MAX_CYCLES)
        return fail(h, NDPH_PROTOCOL, where(*k) + "host access at " + std::to_string(addr) +
                    " did not complete in " + std::to_string(max_cycles) + " cycles");
    if (st) return st;
    for (size_t i = 0; i < k->host_done.size(); ++i) {
        if (k->host_done[i].id != id) continue;
        if (!write) std::memcpy(data, k->host_done[i].data, kBurst);
        k->host_done.erase(k->host_done.begin() + long(i));
        break;
    }
    return NDPH_OK;
}

/// Background host reads on `core`: one 64 B read every `spacing` NDP cycles, cycling over
/// [addr, addr + bytes), while the simulation runs (no call per read). bytes 0 stops it
/// (reads in flight still complete); starting it again resets its counts.
int32_t ndph_host_stream(ndph* h, int32_t core, int64_t addr, int64_t bytes, int64_t spacing) {
    Core* k = core_of(h, core);
    if (!k) return NDPH_VALUE_ERROR;
    HostStream& s = k->stream;
    if (bytes == 0) { s.on = false; return NDPH_OK; }
    if (addr < 0 || addr % kBurst || bytes < 0 || bytes % kBurst || addr + bytes > NDPH_CAPACITY_BYTES ||
        spacing < 1)
        return fail(h, NDPH_VALUE_ERROR, "host stream " + std::to_string(addr) + " + " +
                    std::to_string(bytes) + " bytes every " + std::to_string(spacing) +
                    " cycles: not whole 64 B bursts inside the DIMM, or spacing < 1");
    const int64_t generation = s.generation + 1;
    s = HostStream{};
    s.generation = generation;
    s.on = true; s.addr = addr; s.bytes = bytes; s.spacing = spacing; s.next_cycle = h->ndp_cycle;
    return NDPH_OK;
}

/// out: the background stream's reads issued, completed, and the sum and max of the completed
/// reads' latencies (NDP cycles from issue to response), since it was started.
int32_t ndph_host_stream_stats(ndph* h, int32_t core, int64_t* out) {
    Core* k = core_of(h, core);
    if (!k) return NDPH_VALUE_ERROR;
    const HostStream& s = k->stream;
    out[0] = s.issued; out[1] = s.completed; out[2] = s.latency_sum; out[3] = s.latency_max;
    return NDPH_OK;
}

/// Backdoor into `core`'s DRAM store (the host's writes over the memory channel, in zero time).
int32_t ndph_load(ndph* h, int32_t core, int64_t addr, const uint8_t* data, int64_t n) {
    Core* k = core_of(h, core);
    if (!k) return NDPH_VALUE_ERROR;
    if (k->store->write(addr, data, n) != ndpdram::Status::OK)
        return fail(h, NDPH_VALUE_ERROR, k->store->message());
    return NDPH_OK;
}

int32_t ndph_dump(ndph* h, int32_t core, int64_t addr, uint8_t* out, int64_t n) {
    Core* k = core_of(h, core);
    if (!k) return NDPH_VALUE_ERROR;
    if (k->store->read(addr, n, out) != ndpdram::Status::OK)
        return fail(h, NDPH_VALUE_ERROR, k->store->message());
    return NDPH_OK;
}

/// out: ndp_cycle, dram_cycle, then `core`'s ACT, RD, WR, PRE, REF, bursts read, bursts
/// written, row hits, row misses, store bytes touched.
int32_t ndph_stats(ndph* h, int32_t core, int64_t out[12]) {
    Core* k = core_of(h, core);
    if (!k) return NDPH_VALUE_ERROR;
    ndpdram::Stats s = k->checker->stats();
    out[0] = h->ndp_cycle; out[1] = h->dram_cycle;
    for (int i = 1; i <= 5; ++i) out[1 + i] = k->counts[i];
    out[7] = k->bursts_read; out[8] = k->bursts_written;
    out[9] = s.row_hits; out[10] = s.row_misses; out[11] = k->store->touched_bytes();
    return NDPH_OK;
}

/// Open a VCD of NDP cycles [from, to] (only in a build with waves; else VALUE_ERROR).
int32_t ndph_trace_open(ndph* h, const char* path, int64_t from, int64_t to) {
#ifdef NDPH_TRACE
    if (h->trace) return fail(h, NDPH_VALUE_ERROR, "a waveform is already open");
    h->trace = std::make_unique<VerilatedVcdC>();
    h->top->trace(h->trace.get(), 99);
    h->trace->set_time_unit("1ps");
    h->trace->set_time_resolution("1ps");
    h->trace->open(path);
    if (!h->trace->isOpen()) {
        h->trace.reset();
        return fail(h, NDPH_VALUE_ERROR, std::string("cannot open waveform file ") + path);
    }
    h->trace_from = from;
    h->trace_to = to;
    return NDPH_OK;
#else
    (void)path; (void)from; (void)to;
    return fail(h, NDPH_VALUE_ERROR, "this harness library was built without waveform support");
#endif
}

void ndph_trace_close(ndph* h) {
#ifdef NDPH_TRACE
    if (h->trace) { h->trace->close(); h->trace.reset(); }
#else
    (void)h;
#endif
}

/// Time the clocking loop (steady clock) from now on (on > 0), stop (on == 0) or only read
/// (on < 0); out (when not null): nanoseconds in the Verilated model's eval(), nanoseconds in
/// the run loops as a whole, number of evals.
int32_t ndph_profile(ndph* h, int32_t on, int64_t out[3]) {
    if (on >= 0) h->profile = on != 0;
    if (out) { out[0] = h->eval_ns; out[1] = h->loop_ns; out[2] = h->evals; }
    return NDPH_OK;
}

/// The measurement baseline: only clock the Verilated model for n NDP cycles (both clocks,
/// the same edges as step()), with no DRAM model, no driver and no link channel. Returns
/// cycles run.
int64_t ndph_bare_clock(ndph* h, int64_t n) {
    const int64_t stop = h->ndp_cycle + n;
    bool rise, fall, dram_fall_edge;
    while (h->ndp_cycle < stop) clock_edges(h, &rise, &fall, &dram_fall_edge);
    h->dead = true;   // the DRAM saw no commands: this instance is only good for measuring
    h->error = "this instance was used for a bare clock measurement";
    return n;
}

}  // extern "C"
