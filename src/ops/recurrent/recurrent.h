#pragma once
// What the reference (recurrent.cpp) and the tile rule (tile_recurrent.cpp) of LSTM, GRU and
// RNN share: the cell kind, the dims read from X, W and R, and the output shapes.
#include <string>
#include <vector>

#include "graph/graph.h"

namespace grove {

enum class Cell { rnn, gru, lstm };

int gate_count(Cell c);          // gate blocks of H rows in W and R: 4, 3, 1
size_t activation_count(Cell c); // activations per direction: 3, 2, 1
std::vector<std::string> default_activations(Cell c);
Cell cell_of(const Node& node);

struct RecurrentDims {
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, dirs = 1;
  bool batch_first = false;  // layout 1
};

// Checks X, W and R against each other and the attributes; throws grove::Error.
RecurrentDims recurrent_dims(const Node& node, const Shape& x, const Shape& w, const Shape& r);

// Y: [seq, dirs, batch, hidden] or [batch, seq, dirs, hidden]; Y_h, Y_c, initial_h/c:
// [dirs, batch, hidden] or [batch, dirs, hidden].
Shape recurrent_y_shape(const RecurrentDims& d);
Shape recurrent_state_shape(const RecurrentDims& d);

}  // namespace grove
