// Test-data driver for splatbench (written for splatbench; links the unmodified nianticlabs/spz library).
// spzref encode IN.ply OUT.spz VERSION : PLY (RDF) -> .spz stored in RUB, format VERSION (2, 3 or 4)
// spzref decode IN.spz OUT.ply         : .spz -> PLY converted to RDF (the 3DGS PLY convention)
#include <cstdlib>
#include <iostream>
#include <string>
#include "cc/load-spz.h"

int main(int argc, char **argv) {
  if (argc < 4) { std::cerr << "usage: spzref encode|decode IN OUT [VERSION]\n"; return 2; }
  std::string mode = argv[1];
  if (mode == "encode") {
    spz::UnpackOptions in; in.to = spz::CoordinateSystem::RUB;
    spz::GaussianCloud cloud = spz::loadSplatFromPly(argv[2], in);
    if (cloud.numPoints == 0) { std::cerr << "empty input\n"; return 1; }
    spz::PackOptions out; out.from = spz::CoordinateSystem::RUB;
    out.version = argc > 4 ? std::atoi(argv[4]) : 4;
    return spz::saveSpz(cloud, out, argv[3]) ? 0 : 1;
  }
  if (mode == "decode") {
    spz::UnpackOptions in; in.to = spz::CoordinateSystem::RDF;
    spz::GaussianCloud cloud = spz::loadSpz(argv[2], in);
    if (cloud.numPoints == 0) { std::cerr << "decode failed\n"; return 1; }
    spz::PackOptions out; out.from = spz::CoordinateSystem::RDF;
    return spz::saveSplatToPly(cloud, out, argv[3]) ? 0 : 1;
  }
  return 2;
}
