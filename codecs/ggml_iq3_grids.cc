// The iq3 grids (ggml's iq3xs_init_impl, ggml commit d99724f2) and the
// decoders' tables derived from them.
#include "codecs/ggml_iq3_grids.h"

#include <cstdint>
#include <span>
#include <vector>

namespace lowp::ggml::internal {
namespace {

// The grid points as 12-bit numbers (3 bits a level, element 0 lowest),
// ascending: kgrid_256 and kgrid_512 of iq3xs_init_impl in ggml-quants.c at
// ggml commit d99724f2. They are the formats' codebooks (data, not derived);
// ggml-common.h's iq3xxs_grid and iq3s_grid are the same points spelled as
// decoder bytes, which kIq3XxsGrid and kIq3SGrid rebuild from these.
// clang-format off
constexpr uint16_t kIq3XxsCodes[256] = {
       0,    2,    4,    9,   11,   15,   16,   18,   25,   34,   59,   61,   65,   67,   72,   74,
      81,   85,   88,   90,   97,  108,  120,  128,  130,  132,  137,  144,  146,  153,  155,  159,
     169,  175,  189,  193,  199,  200,  202,  213,  248,  267,  287,  292,  303,  315,  317,  321,
     327,  346,  362,  413,  436,  456,  460,  462,  483,  497,  513,  515,  520,  522,  529,  531,
     536,  538,  540,  551,  552,  576,  578,  585,  592,  594,  641,  643,  648,  650,  657,  664,
     698,  704,  706,  720,  729,  742,  758,  769,  773,  808,  848,  852,  870,  889,  901,  978,
     992, 1024, 1026, 1033, 1035, 1040, 1042, 1046, 1049, 1058, 1089, 1091, 1093, 1096, 1098, 1105,
    1112, 1139, 1143, 1144, 1152, 1154, 1161, 1167, 1168, 1170, 1183, 1184, 1197, 1217, 1224, 1228,
    1272, 1276, 1309, 1323, 1347, 1367, 1377, 1404, 1473, 1475, 1486, 1509, 1537, 1544, 1546, 1553,
    1555, 1576, 1589, 1594, 1600, 1602, 1616, 1625, 1636, 1638, 1665, 1667, 1672, 1685, 1706, 1722,
    1737, 1755, 1816, 1831, 1850, 1856, 1862, 1874, 1901, 1932, 1950, 1971, 2011, 2032, 2052, 2063,
    2077, 2079, 2091, 2095, 2172, 2192, 2207, 2208, 2224, 2230, 2247, 2277, 2308, 2345, 2356, 2389,
    2403, 2424, 2501, 2504, 2506, 2520, 2570, 2593, 2616, 2624, 2630, 2646, 2669, 2700, 2714, 2746,
    2754, 2795, 2824, 2835, 2839, 2874, 2882, 2905, 2984, 3028, 3042, 3092, 3108, 3110, 3124, 3153,
    3185, 3215, 3252, 3288, 3294, 3364, 3397, 3434, 3483, 3523, 3537, 3587, 3589, 3591, 3592, 3610,
    3626, 3670, 3680, 3722, 3749, 3754, 3776, 3789, 3803, 3824, 3857, 3873, 3904, 3906, 3924, 3992,
};
constexpr uint16_t kIq3SCodes[512] = {
       0,    1,    2,    5,    7,    8,    9,   10,   12,   14,   16,   17,   21,   27,   32,   34,
      37,   39,   41,   43,   48,   50,   57,   60,   63,   64,   65,   66,   68,   72,   73,   77,
      80,   83,   87,   89,   93,  100,  113,  117,  122,  128,  129,  133,  135,  136,  139,  142,
     145,  149,  152,  156,  162,  165,  167,  169,  171,  184,  187,  195,  201,  205,  208,  210,
     217,  219,  222,  228,  232,  234,  247,  249,  253,  256,  267,  271,  273,  276,  282,  288,
     291,  297,  312,  322,  324,  336,  338,  342,  347,  353,  357,  359,  374,  379,  390,  393,
     395,  409,  426,  441,  448,  450,  452,  464,  466,  470,  475,  488,  492,  512,  513,  514,
     516,  520,  521,  523,  525,  527,  528,  530,  537,  540,  542,  556,  558,  561,  570,  576,
     577,  579,  582,  584,  588,  593,  600,  603,  609,  616,  618,  632,  638,  640,  650,  653,
     655,  656,  660,  666,  672,  675,  685,  688,  698,  705,  708,  711,  712,  715,  721,  727,
     728,  732,  737,  754,  760,  771,  773,  778,  780,  793,  795,  802,  806,  808,  812,  833,
     840,  843,  849,  856,  858,  873,  912,  916,  919,  932,  934,  961,  963,  968,  970,  977,
     989,  993, 1010, 1016, 1024, 1025, 1027, 1029, 1031, 1032, 1034, 1036, 1038, 1041, 1043, 1047,
    1048, 1050, 1057, 1059, 1061, 1064, 1066, 1079, 1080, 1083, 1085, 1088, 1090, 1096, 1099, 1103,
    1106, 1109, 1113, 1116, 1122, 1129, 1153, 1156, 1159, 1169, 1171, 1176, 1183, 1185, 1195, 1199,
    1209, 1212, 1216, 1218, 1221, 1225, 1234, 1236, 1241, 1243, 1250, 1256, 1270, 1281, 1287, 1296,
    1299, 1306, 1309, 1313, 1338, 1341, 1348, 1353, 1362, 1375, 1376, 1387, 1400, 1408, 1410, 1415,
    1425, 1453, 1457, 1477, 1481, 1494, 1496, 1507, 1512, 1538, 1545, 1547, 1549, 1551, 1554, 1561,
    1563, 1565, 1570, 1572, 1575, 1577, 1587, 1593, 1601, 1603, 1605, 1612, 1617, 1619, 1632, 1648,
    1658, 1662, 1664, 1674, 1680, 1690, 1692, 1704, 1729, 1736, 1740, 1745, 1747, 1751, 1752, 1761,
    1763, 1767, 1773, 1787, 1795, 1801, 1806, 1810, 1817, 1834, 1840, 1844, 1857, 1864, 1866, 1877,
    1882, 1892, 1902, 1915, 1934, 1953, 1985, 1987, 2000, 2002, 2013, 2048, 2052, 2058, 2064, 2068,
    2071, 2074, 2081, 2088, 2104, 2114, 2119, 2121, 2123, 2130, 2136, 2141, 2147, 2153, 2157, 2177,
    2179, 2184, 2189, 2193, 2203, 2208, 2223, 2226, 2232, 2244, 2249, 2251, 2256, 2258, 2265, 2269,
    2304, 2306, 2324, 2335, 2336, 2361, 2373, 2375, 2385, 2418, 2443, 2460, 2480, 2504, 2509, 2520,
    2531, 2537, 2562, 2568, 2572, 2578, 2592, 2596, 2599, 2602, 2614, 2620, 2625, 2627, 2629, 2634,
    2641, 2650, 2682, 2688, 2697, 2707, 2712, 2718, 2731, 2754, 2759, 2760, 2775, 2788, 2793, 2805,
    2811, 2817, 2820, 2832, 2842, 2854, 2890, 2902, 2921, 2923, 2978, 3010, 3012, 3026, 3081, 3083,
    3085, 3097, 3099, 3120, 3136, 3152, 3159, 3188, 3210, 3228, 3234, 3245, 3250, 3256, 3264, 3276,
    3281, 3296, 3349, 3363, 3378, 3392, 3395, 3420, 3440, 3461, 3488, 3529, 3531, 3584, 3588, 3591,
    3600, 3602, 3614, 3616, 3628, 3634, 3650, 3657, 3668, 3683, 3685, 3713, 3716, 3720, 3726, 3729,
    3736, 3753, 3778, 3802, 3805, 3819, 3841, 3845, 3851, 3856, 3880, 3922, 3938, 3970, 3993, 4032,
};
// clang-format on

// A 12-bit point's levels, element i in bits 3i..3i+2.
constexpr int Level(uint16_t u, int i) { return (u >> 3 * i) & 7; }

template <size_t N>
constexpr std::array<Iq3DecodeGrid, N> DecodeGrid(const uint16_t (&codes)[N], bool xxs) {
  std::array<Iq3DecodeGrid, N> grid{};
  for (size_t k = 0; k < N; ++k) {
    for (int i = 0; i < 4; ++i) {
      const int l = Level(codes[k], i);
      grid[k][i] = static_cast<uint8_t>(xxs ? kIq3XxsDecodeLevel[l] : 2 * l + 1);
    }
  }
  return grid;
}

}  // namespace

constexpr std::array<Iq3DecodeGrid, kIq3XxsGridSize> kIq3XxsGrid = DecodeGrid(kIq3XxsCodes, true);
constexpr std::array<Iq3DecodeGrid, kIq3SGridSize> kIq3SGrid = DecodeGrid(kIq3SCodes, false);

// iq3xs_init_impl: the values 2l + 1 of each point, the map from the 4096
// points to grid indices, and for each point off the grid its neighbours.
// ggml qsorts the (squared distance, index) pairs of every grid point and
// keeps them while at most `nwant` distinct distances have been seen. The
// pairs are distinct (the index breaks every tie), so that is every index at
// each of the `nwant` smallest distances, distance by distance, indices
// ascending: what the counting sort here gives.
Iq3Lattice::Iq3Lattice(std::span<const uint16_t> codes, int nwant) : values_(codes.size()) {
  const int size = static_cast<int>(codes.size());
  index_of_.fill(-1);
  for (int k = 0; k < size; ++k) {
    for (int i = 0; i < 4; ++i) values_[k][i] = static_cast<int8_t>(2 * Level(codes[k], i) + 1);
    index_of_[codes[k]] = static_cast<int16_t>(k);
  }
  // Distances in level steps: ggml's squared distance in values 2l + 1 / 4.
  constexpr int kDistances = 4 * (kIq3Levels - 1) * (kIq3Levels - 1) + 1;
  constexpr uint32_t kNotTaken = UINT32_MAX;
  std::vector<std::array<int8_t, 4>> levels(codes.size());
  for (int k = 0; k < size; ++k) {
    for (int i = 0; i < 4; ++i) levels[k][i] = static_cast<int8_t>(Level(codes[k], i));
  }
  std::vector<int> distance(codes.size());
  std::array<int, kDistances> count;
  std::array<uint32_t, kDistances> next;  // where the next index at a taken distance goes
  for (int u = 0; u < kIq3Points; ++u) {
    begin_[u] = static_cast<uint32_t>(neighbours_.size());
    if (index_of_[u] >= 0) continue;
    int8_t pos[4];
    for (int i = 0; i < 4; ++i) pos[i] = static_cast<int8_t>(Level(static_cast<uint16_t>(u), i));
    count.fill(0);
    for (int j = 0; j < size; ++j) {
      int d = 0;
      for (int i = 0; i < 4; ++i) {
        const int diff = levels[j][i] - pos[i];
        d += diff * diff;
      }
      distance[j] = d;
      ++count[d];
    }
    next.fill(kNotTaken);
    uint32_t end = begin_[u];
    for (int d = 0, taken = 0; d < kDistances && taken < nwant; ++d) {
      if (count[d] == 0) continue;
      next[d] = end;
      end += static_cast<uint32_t>(count[d]);
      ++taken;
    }
    neighbours_.resize(end);
    for (int j = 0; j < size; ++j) {
      if (next[distance[j]] != kNotTaken)
        neighbours_[next[distance[j]]++] = static_cast<uint16_t>(j);
    }
  }
  begin_[kIq3Points] = static_cast<uint32_t>(neighbours_.size());
}

const Iq3Lattice& Iq3Lattice::Xxs() {
  static const Iq3Lattice lattice(kIq3XxsCodes, 2);
  return lattice;
}

const Iq3Lattice& Iq3Lattice::S() {
  static const Iq3Lattice lattice(kIq3SCodes, 3);
  return lattice;
}

}  // namespace lowp::ggml::internal
